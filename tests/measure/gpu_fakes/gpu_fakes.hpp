// What the fake CUDA runtime (fake_cudart.cpp) lets a test driver read back.
#pragma once

#include <cuda_runtime.h>

struct LatchLaunch {
  const unsigned long long* flag;  // the cell the kernel polls
  unsigned long long target;       // it runs once *flag >= target
  unsigned long long* expired;     // where it marks a timeout
  cudaStream_t stream;
};

long fake_live_device_buffers();
long fake_live_host_buffers();
long fake_live_events();
long fake_live_streams();
// The latch kernels launched so far (at most `max` copied into `out`); returns how many.
int fake_latch_launches(LatchLaunch* out, int max);
