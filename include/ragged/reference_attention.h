// CPU reference of the attention forward pass of attention.h: the same arguments with host pointers (data,
// offsets / lengths and lse), no workspace, no stream. Per sequence, per head, per query, in double precision:
// the visible keys' scores, their maximum, the sum of exponentials, the weighted sum of V rows; no tiling and
// no online rescaling, so it shares nothing with the kernels but the semantics (see attention.h):
// - causal: query i of L_q sees key j of L_k iff j <= i + L_k - L_q (bottom-right aligned);
// - a query that sees no key, or whose visible scores are all -inf, gets O = 0 and LSE = -inf; a NaN or +inf
//   score makes its O and LSE NaN;
// - rows outside every sequence are not written;
// - rows are clamped like the kernels clamp them, but results are only meaningful for valid offsets.
// Any head_dim >= 1 works here (the device op supports 64 and 128).
#pragma once

#include <cstdint>

#include "ragged/attention.h"

namespace ragged {
namespace reference {

// Writes args.o (each element rounded to T once, from double) and, if non-null, args.lse (float).
template <typename T, typename OffsetT>
void attention_forward(const AttentionArgs<T, OffsetT>& args);

// The unrounded results for tests: out dense [q rows, heads_q, head_dim], lse [q rows, heads_q] (either may be
// null). args.o and args.lse are ignored. Rows outside every sequence are not written.
template <typename T, typename OffsetT>
void attention_forward_exact(const AttentionArgs<T, OffsetT>& args, double* out, double* lse);

}  // namespace reference
}  // namespace ragged
