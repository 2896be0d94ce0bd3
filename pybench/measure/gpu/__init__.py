"""GPU measurements beside the NCCL backend: locating NCCL, copy bandwidth, the link matrix."""
