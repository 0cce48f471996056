// ragged: CUDA kernels for ragged (variable-length) tensors. Umbrella header.
#pragma once

#include "ragged/attention.h"
#include "ragged/buffer.h"
#include "ragged/check.h"
#include "ragged/config.h"
#include "ragged/convert.h"
#include "ragged/dtype.h"
#include "ragged/dynamic.h"
#include "ragged/offsets.h"
#include "ragged/packing.h"
#include "ragged/planner.h"
#include "ragged/rnn.h"
#include "ragged/rnn_module.h"
#include "ragged/segment_reduce.h"
#include "ragged/status.h"
#include "ragged/tensor.h"
#include "ragged/view.h"
