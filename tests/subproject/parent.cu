// The parent project's own CUDA code, built for the parent's architectures (75 in the check), not ragged's.
__global__ void parent_kernel(int* out) { *out = 1; }
