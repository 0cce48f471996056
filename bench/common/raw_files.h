// The file exchange between ragged's I/O tools (rnn_driver, attention_io, segment_io) and the Python scripts
// that hold them against PyTorch: a folder of raw little-endian arrays, dense and row-major, plus a text file of
// "key value" lines. Every failure throws std::runtime_error naming the file.
#pragma once

#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ragged {
namespace bench {

// A text file of "key value" lines (whitespace-separated, values without spaces).
struct KeyValueFile {
  std::string path;
  std::map<std::string, std::string> values;

  // The value of a key the file must hold.
  const std::string& required(const std::string& key) const {
    const auto it = values.find(key);
    if (it == values.end()) throw std::runtime_error(path + " lacks " + key);
    return it->second;
  }
  // The value, or `fallback` where the file leaves the key out.
  std::string optional(const std::string& key, const std::string& fallback) const {
    const auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
};

inline KeyValueFile read_key_values(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  KeyValueFile file{path, {}};
  std::string key, value;
  while (in >> key >> value) file.values[key] = value;
  return file;
}

inline std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const void* data, std::size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Exactly `count` elements: a file of another size means the script and the tool disagree on a shape.
template <typename T>
std::vector<T> read_array(const std::string& path, std::size_t count) {
  const std::vector<char> bytes = read_bytes(path);
  if (bytes.size() != count * sizeof(T))
    throw std::runtime_error(path + " holds " + std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(count * sizeof(T)));
  std::vector<T> out(count);
  if (count > 0) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

template <typename T>
void write_array(const std::string& path, const std::vector<T>& values) {
  write_bytes(path, values.data(), values.size() * sizeof(T));
}

}  // namespace bench
}  // namespace ragged
