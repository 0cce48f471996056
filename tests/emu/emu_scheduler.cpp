// The CUDA kernel emulator's scheduler: fibers for the threads of the blocks that run together, run to their
// rendezvous points (warp collectives, __syncthreads, grid.sync), and kernel launches. A fault inside a kernel is
// reported with its kernel, block and thread (device memory ends at a guard page: emu_cuda_api.cpp).
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ucontext.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

#include "cuda_emu.h"
#include "emu_streams.h"

#if !defined(__x86_64__)
#error "the emulator's fiber switch is written for x86-64"
#endif

// emu_switch(save, load): saves the callee-saved registers and the floating-point control words on the current
// stack, stores the stack pointer to *save, then resumes the stack at `load` (saved the same way).
asm(R"(
  .text
  .globl emu_switch
  .type emu_switch, @function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
)");
extern "C" void emu_switch(void** save, void* load);

// UBSan's runtime, where build.sh's alignment check links it (weak: a build without the check has none), and its
// options: a stack trace with each report, which names the kernel's functions.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1"; }

namespace emu {

ThreadState* g_current = nullptr;
dim3 g_block_dim;
dim3 g_grid_dim;

namespace {

enum class State { kReady, kWarp, kBlock, kGrid, kPrior, kDone };

struct Fiber {
  ThreadState ts{};
  void* sp = nullptr;
  State state = State::kDone;
  WarpOp op = WarpOp::kSyncWarp;
  unsigned mask = 0;
  std::uint64_t value = 0;
  int arg = 0;
  int width = 32;
  std::uint64_t result = 0;
  WarpComputeFn fn = nullptr;  // kCompute
  void* io = nullptr;
  bool waited = false;  // has reached wait_for_prior_grid()
};

// Fiber stacks come 1024 to a mapping (a guard page each would split a cooperative grid of 30000+ threads into
// more mappings than Linux allows); an overflow is caught by a canary at each stack's bottom instead. 32 KB: the
// deepest stack the RNN and attention tests reached was 8 KB (pages touched, 2026-12-06). The mappings ask for
// transparent huge pages (where the kernel gives them): a round switches to every fiber of the grid, and with 4 KB
// pages each switch missed the TLB twice (stack top, canary), the stall emu_switch and run_blocks' prefetch showed;
// 2 MB pages of 64 stacks took a cooperative RNN test from 26.9 to 19.8 s (32 SMs), for 32 KB resident per fiber.
constexpr std::size_t kStackBytes = 32 * 1024;
constexpr std::size_t kStacksPerMapping = 1024;
constexpr std::uint64_t kStackCanary = 0x5AFE57AC4CA7A4ull;

[[noreturn]] void fail(const std::string& what);

// A block's dynamic shared memory, its last byte against a page the process may not touch: a kernel that reads or
// writes past the bytes its launch asked for faults (on_fault names the kernel, block and thread), where a heap
// buffer let it land in the next allocation (only accesses through __cvta offsets were checked). The base is
// 16-byte aligned, as the GPU's, so an overrun of less than 16 bytes past a size that is not a multiple of 16 still
// passes. size() counts 16 spare bytes past the end that the pointer checks allow (a pointer one past the end);
// they lie in the guard page and are never touched. The mapping is kept and reused for any size it holds.
class GuardedShared {
 public:
  GuardedShared() = default;
  GuardedShared(GuardedShared&& other) noexcept { *this = std::move(other); }
  GuardedShared& operator=(GuardedShared&& other) noexcept {
    std::swap(map_, other.map_);
    std::swap(usable_pages_, other.usable_pages_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  GuardedShared(const GuardedShared&) = delete;
  GuardedShared& operator=(const GuardedShared&) = delete;
  ~GuardedShared() {
    if (map_ != nullptr) munmap(map_, (usable_pages_ + 1) * page_bytes());
  }

  // bytes of `fill` (the garbage a block finds at its start, as on the GPU), then the guard page.
  void assign(std::size_t bytes, unsigned char fill) {
    const std::size_t page = page_bytes();
    const std::size_t usable = (bytes + 15) / 16 * 16;
    const std::size_t pages = (usable + page - 1) / page;
    if (map_ == nullptr || pages > usable_pages_) {
      if (map_ != nullptr) munmap(map_, (usable_pages_ + 1) * page);
      const std::size_t mapped = (pages + 1) * page;
      void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) fail("cannot map a block's shared memory");
      map_ = static_cast<unsigned char*>(m);
      usable_pages_ = pages;
      // A failed split (ENOMEM near vm.max_map_count) would leave no guard: stop rather than check nothing.
      if (mprotect(map_ + pages * page, page, PROT_NONE) != 0) fail("cannot protect a shared memory guard page");
    }
    data_ = map_ + usable_pages_ * page - usable;
    std::memset(data_, fill, usable);
    size_ = bytes + 16;
  }
  unsigned char* data() { return data_; }
  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  unsigned char* map_ = nullptr;
  std::size_t usable_pages_ = 0;
  unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

struct Scheduler {
  std::vector<Fiber> fibers;
  std::vector<char*> stacks;  // bottoms; the canary sits there
  std::vector<int> order;
  void* scheduler_sp = nullptr;
  Fiber* running = nullptr;
  const std::function<void()>* body = nullptr;
  const char* kernel = "";
  int threads = 0;                                  // per block
  std::vector<GuardedShared> shared;  // per running block: dynamic shared memory + 16 spare bytes (unmapped)
  std::mt19937 rng{12345};
  // Per running block (slot): each static __shared__ variable's storage (static_shared), keyed by its tag, ending
  // at a guard page as dynamic shared memory does. Kept from launch to launch (a mapping each), refilled with
  // garbage at a block's first use: `used` holds the run_blocks call that last filled it.
  struct StaticShared {
    GuardedShared storage;
    std::uint64_t used = 0;
  };
  std::vector<std::unordered_map<const void*, StaticShared>> static_shared;
  std::uint64_t run = 0;  // run_blocks calls so far
};
Scheduler S;

// Programmatic dependent launch (cuda_emu.h). A kernel of a chain (launched through launch_after_prior) records
// what it writes: each device page it first writes is copied before the write, and at its end the bytes that
// differ from the copy are what it wrote (a store of the value already there changes nothing a reader could see).
struct DependentLaunch {
  std::map<char*, std::vector<bool>> prior;  // per page, the bytes the kernel before changed
  std::uint64_t prior_step = 0;              // steps_run() when that kernel ran; 0: none
  std::string prior_kernel;
  bool after_prior = false;  // the running kernel was launched after the one before
  bool check = false;        // ... and that one was recorded: its blocks run before_wait first
  bool before_wait = false;  // the running block has threads that have not passed the wait
  bool recording = false;    // the running kernel records its writes
  bool early_trigger = false;  // a thread of the running kernel let its dependents go before its own wait
  bool protecting = false;   // device memory is not all read-write now
  bool gave_up = false;      // the running kernel's protection failed (give_up_protection): no record, no check
  std::map<char*, std::vector<unsigned char>> before;  // the running kernel's written pages, as they were
  char* stepping = nullptr;  // a page opened for one instruction (a read next to, not of, changed bytes)
};
DependentLaunch D;

// Protects each run of consecutive pages (the keys of `pages`) with `prot`; false if an mprotect failed.
template <typename Map>
bool protect_pages(const Map& pages, int prot) {
  const std::size_t page = page_bytes();
  bool all = true;
  for (auto it = pages.begin(); it != pages.end();) {
    char* first = it->first;
    char* end = first + page;
    for (++it; it != pages.end() && it->first == end; ++it) end += page;
    all = mprotect(first, static_cast<std::size_t>(end - first), prot) == 0 && all;
  }
  return all;
}

void on_fault(int sig, siginfo_t* info, void* context);
void take_faults(bool take);

// Each page opened or closed inside a protected allocation splits its mapping, and mprotect fails (ENOMEM) once
// the process holds vm.max_map_count mappings (65530 by default): a kernel writing some 32,000 scattered pages
// of a large buffer (rnn_forward's per-step kernel on 2^31 floats of projections, test_large_tensors) got there,
// and the store that could not open its page faulted again forever. Instead the check stops for the running
// kernel (its remaining reads before its wait, its writes) and the next one, with device memory all open, and the
// emulator says so once per kernel name (a per-step kernel gives up at hundreds of launches).
void give_up_protection(const char* what, std::size_t pages) {
  static std::set<std::string> reported;
  if (!D.gave_up && reported.insert(S.kernel).second)
    std::fprintf(stderr,
                 "emu: kernel %s: mprotect failed (%s) to %s (%zu pages; past vm.max_map_count?): the dependent-launch "
                 "check stops for this launch and the next one, device memory all open (said once per kernel)\n",
                 S.kernel, std::strerror(errno), what, pages);
  D.gave_up = true;
  D.check = D.before_wait = D.recording = false;
  D.stepping = nullptr;
  D.before.clear();
  D.prior.clear();
  protect_device_memory(PROT_READ | PROT_WRITE);
  D.protecting = false;
  take_faults(false);
}

// While device memory is protected for the check, the emulator's fault handler goes first (a test framework may
// have put its own before it, as Catch2 does for each test case), and the one before it is back afterwards.
bool g_faults_taken = false;
struct sigaction g_previous_segv, g_previous_bus;

void take_faults(bool take) {
  if (take == g_faults_taken) return;
  if (take) {
    struct sigaction sa {};
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, &g_previous_segv);
    sigaction(SIGBUS, &sa, &g_previous_bus);
  } else {
    sigaction(SIGSEGV, &g_previous_segv, nullptr);
    sigaction(SIGBUS, &g_previous_bus, nullptr);
  }
  g_faults_taken = take;
}

// Device memory as the running block's phase wants it: before its wait, the prior kernel's pages unreadable and the
// rest read-only; while the kernel records its writes, read-only but for the pages it has written; else all open.
void apply_protection() {
  if (D.before_wait) {
    protect_device_memory(PROT_READ);
    if (!protect_pages(D.prior, PROT_NONE)) return give_up_protection("close the pages it follows", D.prior.size());
  } else if (D.recording) {
    protect_device_memory(PROT_READ);
    if (!protect_pages(D.before, PROT_READ | PROT_WRITE))
      return give_up_protection("open the pages it wrote", D.before.size());
  } else if (D.protecting) {
    protect_device_memory(PROT_READ | PROT_WRITE);
  }
  D.protecting = D.before_wait || D.recording;
  take_faults(D.protecting);
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::kShfl: return "__shfl_sync";
    case WarpOp::kShflUp: return "__shfl_up_sync";
    case WarpOp::kShflDown: return "__shfl_down_sync";
    case WarpOp::kShflXor: return "__shfl_xor_sync";
    case WarpOp::kBallot: return "__ballot_sync";
    case WarpOp::kAny: return "__any_sync";
    case WarpOp::kAll: return "__all_sync";
    case WarpOp::kSyncWarp: return "__syncwarp";
    case WarpOp::kCompute: return "a warp-wide instruction (mma / ldmatrix)";
  }
  return "?";
}

// Where a kernel's UBSan check stops the program (build.sh's EMU_UBSAN: a misaligned access, which a GPU faults on,
// by default), the kernel, block and thread that ran it, after UBSan's report of the source line.
void on_sanitizer_death() {
  if (S.running != nullptr)
    std::fprintf(stderr, "emu: the report above came from kernel %s, block (%u,%u,%u), thread %d\n", S.kernel,
                 S.running->ts.block_idx.x, S.running->ts.block_idx.y, S.running->ts.block_idx.z,
                 S.running->ts.linear);
}

const bool g_sanitizer_death_callback = [] {
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(&on_sanitizer_death);
  return true;
}();

[[noreturn]] void fail(const std::string& what) {
  if (S.running != nullptr)
    std::fprintf(stderr, "emu: kernel %s, block (%u,%u,%u), thread %d: %s\n", S.kernel, S.running->ts.block_idx.x,
                 S.running->ts.block_idx.y, S.running->ts.block_idx.z, S.running->ts.linear, what.c_str());
  else
    std::fprintf(stderr, "emu: kernel %s: %s\n", S.kernel, what.c_str());
  std::fflush(stderr);
  std::abort();
}

void fiber_entry() {
  (*S.body)();
  if (D.after_prior && !S.running->waited)
    fail("a thread of a kernel launched after_prior exited without reaching wait_for_prior_grid(): the grid "
         "could complete before the one it follows");
  S.running->state = State::kDone;
  emu_switch(&S.running->sp, S.scheduler_sp);
  std::abort();  // a finished fiber is never resumed
}

void yield_to_scheduler() { emu_switch(&S.running->sp, S.scheduler_sp); }

char* stack_top(int i) {
  while (static_cast<int>(S.stacks.size()) <= i) {
    void* p = mmap(nullptr, kStackBytes * kStacksPerMapping, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("cannot map fiber stacks");
    madvise(p, kStackBytes * kStacksPerMapping, MADV_HUGEPAGE);  // a hint: no error where the kernel has none
    for (std::size_t k = 0; k < kStacksPerMapping; ++k) S.stacks.push_back(static_cast<char*>(p) + k * kStackBytes);
  }
  std::memcpy(S.stacks[i], &kStackCanary, sizeof kStackCanary);
  return S.stacks[i] + kStackBytes;
}

void check_stack(int i) {
  if (std::memcmp(S.stacks[i], &kStackCanary, sizeof kStackCanary) != 0)
    fail("fiber stack overflow (" + std::to_string(kStackBytes / 1024) + " KB)");
}

// Asks for the lines fiber `t` touches first when resumed (emu_switch's saved words, the frame above them, the
// canary check's) while the fiber before it runs. Why: a round resumes every fiber once, and each one's stack was
// last touched a round earlier, so these loads missed the cache at nearly every switch (45% of a cooperative RNN
// test's time in emu_switch and the canary check, on 2026-11-30; 28% less time with the prefetch). The prefetch is
// an asm statement: g++ 12 deleted a helper made of __builtin_prefetch calls as a function without side effects.
void prefetch_line(const char* p) { asm volatile("prefetcht0 %0" : : "m"(*p)); }

void prefetch_fiber(int t) {
  const Fiber& next = S.fibers[t];
  if (next.state != State::kReady) return;
  const char* sp = static_cast<const char*>(next.sp);
  prefetch_line(sp);
  prefetch_line(sp + 64);
  prefetch_line(sp + 128);
  prefetch_line(S.stacks[t]);
}

// A fresh fiber's stack as emu_switch leaves it: control words, six registers, then the return into
// fiber_entry, placed so that fiber_entry starts with the stack aligned as after a call.
void* fresh_stack(int i) {
  auto* top = reinterpret_cast<std::uint64_t*>(stack_top(i));
  std::uint64_t* ret = top - 2;  // 16-byte aligned: rsp % 16 == 8 at entry, as after a call
  *ret = reinterpret_cast<std::uint64_t>(&fiber_entry);
  std::uint64_t* sp = ret - 7;
  for (int k = 1; k < 7; ++k) sp[k] = 0;
  std::uint32_t control[2] = {0x1F80u, 0x037Fu};  // MXCSR and x87 control word defaults
  std::memcpy(sp, control, sizeof control);
  return sp;
}

std::string lane_states(int base, int lanes) {
  std::string s;
  for (int l = 0; l < lanes; ++l) {
    const Fiber& f = S.fibers[base + l];
    s += f.state == State::kReady ? 'r' : f.state == State::kWarp ? 'w' : f.state == State::kBlock ? 'b'
         : f.state == State::kGrid ? 'g' : f.state == State::kPrior ? 'p' : '-';
  }
  return s;
}

// Releases the collectives of the warp of `lanes` threads from fiber `base` whose masks have fully arrived.
// Returns whether any was released.
bool resolve_warp(int base, int lanes) {
  bool released = false;
  for (int l = 0; l < lanes; ++l) {
    Fiber& f = S.fibers[base + l];
    if (f.state != State::kWarp) continue;
    if ((f.mask >> l & 1u) == 0) fail(std::string(op_name(f.op)) + " called by a lane outside its own mask");
    bool complete = true;
    for (int j = 0; j < 32; ++j) {
      if ((f.mask >> j & 1u) == 0) continue;
      if (j >= lanes) fail(std::string(op_name(f.op)) + " mask names a lane past the end of the block");
      const Fiber& g = S.fibers[base + j];
      if (g.state == State::kDone)
        fail(std::string(op_name(f.op)) + " mask names lane " + std::to_string(j) + ", which has exited (warp " +
             std::to_string(base / 32) + " lanes " + lane_states(base, lanes) + ")");
      if (g.state != State::kWarp) {
        complete = false;
        continue;
      }
      if (g.mask != f.mask || g.op != f.op || g.fn != f.fn)
        fail(std::string("lanes of warp ") + std::to_string(base / 32) + " meet at different collectives: " +
             op_name(f.op) + " mask " + std::to_string(f.mask) + " and " + op_name(g.op) + " mask " +
             std::to_string(g.mask));
    }
    if (!complete) continue;
    const unsigned mask = f.mask;
    if (f.op == WarpOp::kCompute) {
      void* io[32];
      for (int j = 0; j < 32; ++j) io[j] = S.fibers[base + j].io;
      S.running = &f;  // the warp's block: its shared memory, and where an error is reported
      f.fn(io);
      S.running = nullptr;
    }
    std::uint64_t bits = 0;
    for (int j = 0; j < 32; ++j)
      if ((mask >> j & 1u) && S.fibers[base + j].value != 0) bits |= 1ull << j;
    for (int j = 0; j < 32; ++j) {
      if ((mask >> j & 1u) == 0) continue;
      Fiber& g = S.fibers[base + j];
      const int w = g.width;
      if (w <= 0 || w > 32 || (w & (w - 1)) != 0) fail("shuffle width is not a power of 2 up to 32");
      const int seg = j & ~(w - 1), in = j & (w - 1);
      int src = j;
      switch (g.op) {
        case WarpOp::kShfl: src = seg + (g.arg & (w - 1)); break;
        case WarpOp::kShflUp: src = in >= g.arg ? j - g.arg : j; break;
        case WarpOp::kShflDown: src = in + g.arg < w ? j + g.arg : j; break;
        case WarpOp::kShflXor: src = ((j ^ g.arg) & ~(w - 1)) == seg ? (j ^ g.arg) : j; break;
        default: break;
      }
      if (g.op == WarpOp::kBallot) g.result = bits;
      else if (g.op == WarpOp::kAny) g.result = bits != 0;
      else if (g.op == WarpOp::kAll) g.result = bits == mask;
      else if (g.op == WarpOp::kSyncWarp || g.op == WarpOp::kCompute) g.result = 0;
      else {
        if ((mask >> src & 1u) == 0)
          fail(std::string(op_name(g.op)) + ": lane " + std::to_string(j) + " reads lane " + std::to_string(src) +
               ", which is not in the mask");
        g.result = S.fibers[base + src].value;
      }
    }
    for (int j = 0; j < 32; ++j)
      if (mask >> j & 1u) S.fibers[base + j].state = State::kReady;
    released = true;
  }
  return released;
}

// Releases every warp collective whose mask has fully arrived. Returns whether any was released.
bool resolve_warps() {
  bool released = false;
  const int n = static_cast<int>(S.fibers.size());
  for (int block0 = 0; block0 < n; block0 += S.threads)
    for (int base = block0; base < block0 + S.threads; base += 32)
      released = resolve_warp(base, std::min(32, block0 + S.threads - base)) || released;
  return released;
}

// Releases the block of fibers block0 .. block0 + threads - 1 if every thread has reached __syncthreads or exited.
bool resolve_block(std::size_t block0) {
  bool any = false;
  for (std::size_t t = block0; t < block0 + S.threads; ++t) {
    const State st = S.fibers[t].state;
    if (st != State::kBlock && st != State::kDone) return false;
    any = any || st == State::kBlock;
  }
  if (!any) return false;
  for (std::size_t t = block0; t < block0 + S.threads; ++t)
    if (S.fibers[t].state == State::kBlock) S.fibers[t].state = State::kReady;
  return true;
}

// Releases the blocks whose every thread has reached __syncthreads or exited.
bool resolve_blocks() {
  bool released = false;
  for (std::size_t block0 = 0; block0 < S.fibers.size(); block0 += S.threads)
    released = resolve_block(block0) || released;
  return released;
}

// Ends the blocks' time before wait_for_prior_grid() once no thread can run on without passing it: the threads
// waiting there go on, with device memory open again (or recording).
bool release_prior_waits() {
  bool any = false;
  for (Fiber& f : S.fibers)
    if (f.state == State::kPrior) {
      f.state = State::kReady;
      any = true;
    }
  if (D.before_wait) {
    D.before_wait = false;
    apply_protection();
  }
  return any;
}

// Releases grid.sync() once every thread of the grid is there; a thread that exited instead would hang the GPU.
bool resolve_grid() {
  bool any = false;
  for (const Fiber& f : S.fibers) {
    if (f.state != State::kGrid && f.state != State::kDone) return false;
    any = any || f.state == State::kGrid;
  }
  if (!any) return false;
  for (const Fiber& f : S.fibers)
    if (f.state == State::kDone) fail("grid.sync() while some threads of the grid have exited");
  for (Fiber& f : S.fibers) f.state = State::kReady;
  return true;
}

// kWarps: only the first warp (in forward order) that has a ready thread runs (run_warps_in_turn), so a warp
// runs through its warp collectives up to a block barrier (or its end) before the next warp starts: the most skew
// between the warps of a block. In the other orders every ready thread runs once a round, so the warps of a block
// move in lockstep from one collective to the next, and a missing barrier between two warps' uses of a shared
// buffer passes wherever both uses sit in collectives (ldmatrix, mma).
enum class Order { kForward, kReverse, kShuffle, kWarps };
Order lane_order() {
  static const Order order = [] {
    const char* e = std::getenv("EMU_ORDER");
    if (e == nullptr || std::string(e) == "forward") return Order::kForward;
    if (std::string(e) == "reverse") return Order::kReverse;
    if (std::string(e) == "warps") return Order::kWarps;
    return Order::kShuffle;
  }();
  return order;
}

[[noreturn]] void report_deadlock() {
  std::string states;
  const int n = static_cast<int>(S.fibers.size());
  for (int block0 = 0; block0 < n; block0 += S.threads)
    for (int base = block0; base < block0 + S.threads; base += 32)
      states += " block " + std::to_string(block0 / S.threads) + " warp " + std::to_string((base - block0) / 32) +
                ":" + lane_states(base, std::min(32, block0 + S.threads - base));
  fail("deadlock (r ready, w at a warp collective, b at __syncthreads, g at grid.sync, - exited):" + states);
}

bool all_done() {
  for (const Fiber& f : S.fibers)
    if (f.state != State::kDone) return false;
  return true;
}

// Order::kWarps. The first warp (fibers in forward order) with a ready thread runs until none of its threads is
// ready (each at a block barrier, grid.sync, the dependent-launch wait or its end), its collectives released as
// they complete, then the barrier of its block if it was the last to arrive. That is the order of run_blocks's
// rounds with only that warp in each, without their scans of every fiber after each of its collectives, which
// made a warp's turn cost the whole cooperative grid (a skewed RNN case on 132 SMs ran for over 41 minutes).
void run_warps_in_turn() {
  const int n = static_cast<int>(S.fibers.size());
  const int threads = S.threads;
  int cursor = 0;  // no fiber before it is ready
  for (;;) {
    int t = cursor;
    while (t < n && S.fibers[t].state != State::kReady) ++t;
    if (t < n) {
      const int block0 = t / threads * threads;
      const int base = block0 + (t - block0) / 32 * 32;
      const int lanes = std::min(32, block0 + threads - base);
      do {
        for (int l = 0; l < lanes; ++l) {
          Fiber& f = S.fibers[base + l];
          if (l + 1 < lanes) prefetch_fiber(base + l + 1);
          if (f.state != State::kReady) continue;
          S.running = &f;
          g_current = &f.ts;
          emu_switch(&S.scheduler_sp, f.sp);
          check_stack(base + l);
        }
        S.running = nullptr;
      } while (resolve_warp(base, lanes));
      cursor = resolve_block(static_cast<std::size_t>(block0)) ? block0 : base + lanes;
      continue;
    }
    // No thread is ready: a grid.sync, or the waits of a dependent launch, may let some go on.
    bool released = resolve_blocks() | resolve_grid();
    if (!released) released = release_prior_waits();
    if (all_done()) {
      if (D.before_wait) release_prior_waits();
      return;
    }
    if (!released) report_deadlock();
    cursor = 0;
  }
}

// Runs the given blocks together to completion: one block at a time for a normal launch, the whole grid for a
// cooperative one.
void run_blocks(const std::vector<uint3>& blocks, std::size_t shared_bytes) {
  const int threads = S.threads;
  const int n = static_cast<int>(blocks.size()) * threads;
  S.fibers.assign(n, Fiber{});
  S.order.resize(n);
  S.shared.resize(blocks.size());
  for (auto& buffer : S.shared) buffer.assign(shared_bytes, 0xA5);  // garbage at the start, as on the GPU
  ++S.run;  // every static __shared__ variable is garbage again at its block's first use
  if (S.static_shared.size() < blocks.size()) S.static_shared.resize(blocks.size());
  for (int t = 0; t < n; ++t) {
    Fiber& f = S.fibers[t];
    const int linear = t % threads;
    f.ts.linear = linear;
    f.ts.slot = t / threads;
    f.ts.block_idx = blocks[t / threads];
    f.ts.thread_idx = uint3{linear % g_block_dim.x, linear / g_block_dim.x % g_block_dim.y,
                            linear / (g_block_dim.x * g_block_dim.y)};
    f.sp = fresh_stack(t);
    f.state = State::kReady;
    S.order[t] = lane_order() == Order::kReverse ? n - 1 - t : t;
  }
  if (lane_order() == Order::kShuffle) std::shuffle(S.order.begin(), S.order.end(), S.rng);
  if (D.check) {
    D.before_wait = true;
    apply_protection();
  }
  if (lane_order() == Order::kWarps) {
    run_warps_in_turn();
    return;
  }
  const int count = static_cast<int>(S.order.size());
  for (;;) {
    bool ran = false;
    for (int k = 0; k < count; ++k) {
      const int t = S.order[k];
      Fiber& f = S.fibers[t];
      if (k + 1 < count) prefetch_fiber(S.order[k + 1]);
      if (k + 2 < count) prefetch_line(reinterpret_cast<const char*>(&S.fibers[S.order[k + 2]]));
      if (f.state != State::kReady) continue;
      S.running = &f;
      g_current = &f.ts;
      emu_switch(&S.scheduler_sp, f.sp);
      check_stack(t);
      ran = true;
    }
    S.running = nullptr;
    bool released = resolve_warps() | resolve_blocks() | resolve_grid();
    if (!ran && !released) released = release_prior_waits();
    if (all_done()) {
      if (D.before_wait) release_prior_waits();
      return;
    }
    if (!ran && !released) report_deadlock();
  }
}

// Faults inside a kernel are most likely out-of-bounds accesses: say where before dying. Those on device pages
// protected for the dependent-launch check are either a recorded write (the page opens and the store runs again)
// or the check's finding.
void on_fault(int sig, siginfo_t* info, void* context) {
  char* page = D.protecting && S.running != nullptr ? device_page(info->si_addr) : nullptr;
  if (page != nullptr) {
    auto* uc = static_cast<ucontext_t*>(context);
    const bool write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
    if (D.before_wait) {
      // A read of the prior kernel's page that does not touch the bytes it changed (the aligned 16 bytes around
      // the address: the widest load) runs with the page open for one instruction (the trap flag; on_step).
      const auto prior = D.prior.find(page);
      const std::size_t at = static_cast<std::size_t>(static_cast<char*>(info->si_addr) - page) / 16 * 16;
      bool changed = false;
      if (prior != D.prior.end())
        for (std::size_t b = at; b < at + 16 && b < prior->second.size(); ++b) changed = changed || prior->second[b];
      if (!write && prior != D.prior.end() && !changed) {
        if (mprotect(page, page_bytes(), PROT_READ) != 0)
          return give_up_protection("open a page for one read", D.prior.size());
        D.stepping = page;
        uc->uc_mcontext.gregs[REG_EFL] |= 0x100;
        return;
      }
      std::fprintf(
          stderr,
          "emu: kernel %s, block (%u,%u,%u), thread %d: %s device memory at %p before wait_for_prior_grid()%s\n",
          S.kernel, S.running->ts.block_idx.x, S.running->ts.block_idx.y, S.running->ts.block_idx.z,
          S.running->ts.linear, write ? "writes" : "reads", info->si_addr,
          changed ? (", bytes that the kernel it follows (" + D.prior_kernel + ") wrote").c_str() : "");
      std::fflush(stderr);
      std::abort();
    }
    if (D.recording && write) {
      D.before[page].assign(page, page + page_bytes());
      if (mprotect(page, page_bytes(), PROT_READ | PROT_WRITE) != 0)
        give_up_protection("open a page it writes", D.before.size());
      return;
    }
  }
  if (info->si_code == SI_USER || info->si_code == SI_TKILL) {  // raised again by a handler that went first
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  if (S.running != nullptr)
    std::fprintf(stderr, "emu: %s at address %p in kernel %s, block (%u,%u,%u), thread %d\n",
                 sig == SIGSEGV ? "segmentation fault" : "bus error", info->si_addr, S.kernel,
                 S.running->ts.block_idx.x, S.running->ts.block_idx.y, S.running->ts.block_idx.z,
                 S.running->ts.linear);
  else
    std::fprintf(stderr, "emu: %s at address %p outside any kernel\n",
                 sig == SIGSEGV ? "segmentation fault" : "bus error", info->si_addr);
  if (g_faults_taken) {  // the handler that was first before the check reports it too: the access faults again
    take_faults(false);
    return;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// After the one instruction a page was opened for (on_fault): closed again.
void on_step(int, siginfo_t*, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;
  if (D.stepping != nullptr) mprotect(D.stepping, page_bytes(), PROT_NONE);
  D.stepping = nullptr;
}

// The handler runs on its own stack, in case a fault is a fiber's stack overflow into its neighbour's mapping.
struct FaultHandler {
  FaultHandler() {
    static std::vector<char> alt(1 << 16);
    stack_t ss{};
    ss.ss_sp = alt.data();
    ss.ss_size = alt.size();
    sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    sa.sa_sigaction = &on_step;
    sigaction(SIGTRAP, &sa, nullptr);
  }
} g_fault_handler;

}  // namespace

void kernel_error(const char* what) { fail(what); }

std::uint64_t warp_collective(WarpOp op, unsigned mask, std::uint64_t value, int arg, int width) {
  Fiber& f = *S.running;
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.arg = arg;
  f.width = width;
  f.state = State::kWarp;
  yield_to_scheduler();
  return f.result;
}

void warp_compute(WarpComputeFn fn, void* io) {
  Fiber& f = *S.running;
  if (S.threads % 32 != 0) fail("a warp-wide instruction in a block whose last warp is partial");
  f.fn = fn;
  f.io = io;
  warp_collective(WarpOp::kCompute, 0xffffffffu, 0, 0, 32);
  f.fn = nullptr;
}

GuardedShared& block_shared() { return S.shared[S.running->ts.slot]; }

std::size_t shared_offset(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  const auto& shared = block_shared();
  if (c < shared.data() || c > shared.data() + shared.size())
    fail("__cvta_generic_to_shared of a pointer outside the block's dynamic shared memory");
  return static_cast<std::size_t>(c - shared.data());
}

void* shared_pointer(unsigned offset, std::size_t bytes) {
  auto& shared = block_shared();
  if (offset + bytes > shared.size() - 16) fail("a shared-memory access past the block's dynamic shared memory");
  return shared.data() + offset;
}

void block_barrier() {
  S.running->state = State::kBlock;
  yield_to_scheduler();
}

void grid_barrier() {
  S.running->state = State::kGrid;
  yield_to_scheduler();
}

void* dynamic_shared() { return block_shared().data(); }

void* static_shared(const void* tag, std::size_t bytes) {
  Scheduler::StaticShared& variable = S.static_shared[S.running->ts.slot][tag];
  if (variable.used != S.run) {  // the block's first use: garbage, as on the GPU
    variable.storage.assign(bytes, 0xA5);
    variable.used = S.run;
  }
  return variable.storage.data();
}

// Recording starts with the kernel (launch_body's `record`), since a write made before the call is no more
// visible to the next kernel's code before its wait than one made after it.
// Before the wait, it lets the next kernel start while the one before may still run: that one's writes stay
// unreadable to the next kernel's code before its wait, with this kernel's (launch_body).
void allow_dependent_grid() {
  if (S.running != nullptr && !S.running->waited) D.early_trigger = true;
}

void wait_for_prior_grid() {
  S.running->waited = true;
  if (!D.before_wait) return;
  S.running->state = State::kPrior;
  yield_to_scheduler();
}

void forget_kernel_writes() {
  D.prior.clear();
  D.prior_step = 0;
}

void launch_body(const char* name, const LaunchConfig& c, std::function<void()> body, bool cooperative,
                 bool after_prior, bool record) {
  if (std::getenv("EMU_TRACE") != nullptr)
    std::fprintf(stderr, "emu: launch %s grid (%u,%u,%u) block (%u,%u,%u) shared %zu%s%s\n", name, c.grid.x, c.grid.y,
                 c.grid.z, c.block.x, c.block.y, c.block.z, c.shared, cooperative ? " (cooperative)" : "",
                 is_capturing(c.stream) ? " (captured)" : "");
  const std::uint64_t threads = std::uint64_t{c.block.x} * c.block.y * c.block.z;
  const bool bad = threads == 0 || threads > 1024 || c.block.z > 64 || c.grid.x == 0 || c.grid.y == 0 ||
                   c.grid.z == 0 || c.grid.x > 0x7fffffffu || c.grid.y > 65535 || c.grid.z > 65535;
  if (bad) {
    set_error(cudaErrorInvalidConfiguration);
    return;
  }
  // Past the 48 KB default a kernel needs cudaFuncSetAttribute(MaxDynamicSharedMemorySize), in this context, as
  // on a GPU. (A launch that does not name its kernel is held to the device's opt-in limit only.)
  const std::size_t limit = c.kernel != nullptr ? dynamic_shared_limit(c.kernel)
                                                : static_cast<std::size_t>(shared_optin_bytes());
  if (c.shared > limit) {
    if (std::getenv("EMU_TRACE") != nullptr)
      std::fprintf(stderr, "emu: launch %s refused: %zu bytes of shared memory, the kernel's limit is %zu\n", name,
                   c.shared, limit);
    set_error(cudaErrorInvalidValue);
    return;
  }
  const std::uint64_t blocks = std::uint64_t{c.grid.x} * c.grid.y * c.grid.z;
  if (cooperative && blocks > static_cast<std::uint64_t>(sm_count()) *
                                  static_cast<std::uint64_t>(resident_blocks(c.kernel, static_cast<int>(threads),
                                                                             c.shared))) {
    set_error(cudaErrorCooperativeLaunchTooLarge);
    return;
  }
  // EMU_PDL_CHECK=0: no recording, so no check before the waits (to time what the check costs).
  static const bool check_dependents = env_int("EMU_PDL_CHECK", 1) != 0;
  record = record && check_dependents;
  enqueue(c.stream, [name, c, threads, cooperative, after_prior, record, body = std::move(body)] {
    const std::uint64_t step = steps_run();
    D.after_prior = after_prior;
    D.check = after_prior && D.prior_step != 0 && D.prior_step + 1 == step;
    if (!D.check) D.prior.clear();
    D.early_trigger = false;
    D.gave_up = false;
    D.recording = record;
    S.kernel = name;
    apply_protection();
    S.body = &body;
    S.threads = static_cast<int>(threads);
    g_block_dim = c.block;
    g_grid_dim = c.grid;
    const char* order = std::getenv("EMU_BLOCKS");
    const bool reverse = order != nullptr && std::string(order) == "reverse";
    const bool waves = order != nullptr && std::string(order) == "waves";
    std::vector<uint3> all;
    for (unsigned z = 0; z < c.grid.z; ++z)
      for (unsigned y = 0; y < c.grid.y; ++y)
        for (unsigned x = 0; x < c.grid.x; ++x) all.push_back(uint3{x, y, z});
    if (reverse) std::reverse(all.begin(), all.end());
    // EMU_BLOCKS=waves: a normal launch runs as many blocks at once as the device holds (SMs times the blocks per
    // SM the occupancy answer gives), their threads interleaved as a cooperative grid's, wave after wave: blocks
    // that meet through global memory (arrival counters, the last one merging) then do so in other orders than
    // one block after another.
    const std::size_t wave =
        waves ? static_cast<std::size_t>(std::max(1, sm_count() * resident_blocks(c.kernel, static_cast<int>(threads),
                                                                                   c.shared)))
              : 1;
    if (cooperative) run_blocks(all, c.shared);
    else
      for (std::size_t first = 0; first < all.size(); first += wave)
        run_blocks(std::vector<uint3>(all.begin() + static_cast<std::ptrdiff_t>(first),
                                      all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), first + wave))),
                   c.shared);
    S.running = nullptr;
    g_current = nullptr;
    // The bytes this kernel changed are what the next kernel may not read before its wait.
    // A kernel that let its dependents go before its own wait (a chain A -> B -> C where B triggers early) lets
    // C start while A may still run: A's changed bytes stay in the set with B's.
    const bool keep_prior = D.check && D.early_trigger;
    D.after_prior = D.check = D.before_wait = false;
    D.recording = false;
    apply_protection();
    if (!keep_prior) D.prior.clear();
    for (const auto& [page, was] : D.before) {
      std::vector<bool> changed(was.size());
      bool any = false;
      for (std::size_t b = 0; b < was.size(); ++b) any |= changed[b] = page[b] != static_cast<char>(was[b]);
      if (!any) continue;
      auto [at, added] = D.prior.emplace(page, changed);
      if (!added)
        for (std::size_t b = 0; b < changed.size(); ++b) at->second[b] = at->second[b] || changed[b];
    }
    D.before.clear();
    D.prior_step = record && !D.gave_up ? step : 0;
    D.prior_kernel = keep_prior ? std::string(name) + " or a kernel it let run on by triggering before its wait"
                                : std::string(name);
  });
}

}  // namespace emu
