# An elementwise add, C = A + B, as a PyTorch function: the torch kind
# of --kernel (docs/kernels.md). The wrapper calls kernel with every
# tensor of the case in signature order; it writes the outputs it is
# given.
#
# tilepipe-ops: add
# tilepipe-dtypes: f32 bf16

import torch


def kernel(A, B, C):
    torch.add(A, B, out=C)
