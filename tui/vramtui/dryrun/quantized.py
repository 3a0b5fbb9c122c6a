"""Quantised linear layers on the meta device, where bitsandbytes and the GPTQ/AWQ kernels do
not run.

Each quantised nn.Linear is replaced by a stand-in that holds its packed data and its
quantisation metadata as uint8 tensors of the sizes the ledger's format rules give
(`vramtui.ledger.formats.linear_bytes`: bitsandbytes NF4/FP4 n/2 B + absmax, LLM.int8,
FP8, GPTQ/AWQ packed int32 + scales/zeros, GGUF blocks) and keeps its bias in the compute
dtype. Its forward computes in the compute dtype and, where the real kernel does, materialises
a dequantised 16-bit copy of the weight for the matmul and frees it (bitsandbytes' MatMul4Bit
dequantises in forward and again in backward to get the input gradient; it saves no input).
"""

from __future__ import annotations

# Formats whose real kernel materialises a dequantised (out x in) weight per matmul.
# bitsandbytes 4-bit (MatMul4Bit) and transformers' GGUF path always do; GPTQ/AWQ kernels do for
# batches of 256 tokens or more (the exllama/AWQ "dequantise then GEMM" heuristic), fused
# kernels below; FP8 scaled_mm and LLM.int8 compute without a 16-bit weight copy.
ALWAYS_DEQUANTISE = ("nf4", "fp4", "gguf")
LARGE_BATCH_DEQUANTISE = ("gptq", "awq")
LARGE_BATCH_TOKENS = 256

FORMAT_NOTES = {
    "nf4": "dequantised to a 16-bit copy in forward and again in backward (MatMul4Bit)",
    "fp4": "dequantised to a 16-bit copy in forward and again in backward (MatMul4Bit)",
    "gguf": "dequantised to a 16-bit copy per matmul",
    "gptq": "dequantised to a 16-bit copy for batches of 256+ tokens, fused kernel below",
    "awq": "dequantised to a 16-bit copy for batches of 256+ tokens, fused kernel below",
    "fp8": "computed without a 16-bit weight copy (scaled matmul)",
    "int8": "computed without a 16-bit weight copy (LLM.int8's int8 input copies not modelled)",
}


def _function():
    import torch

    class _QuantMatmul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, bias, out_features, in_features, dequantise):
            ctx.shape = (out_features, in_features)
            ctx.dequantise = dequantise
            ctx.has_bias = bias is not None
            if dequantise:
                w = torch.empty((out_features, in_features), dtype=x.dtype, device=x.device)
                y = torch.nn.functional.linear(x, w, bias)
                del w
                return y
            y = x.new_empty(x.shape[:-1] + (out_features,))
            if bias is not None:
                y = y + bias
            return y

        @staticmethod
        def backward(ctx, grad_out):
            out_features, in_features = ctx.shape
            gx = None
            if ctx.needs_input_grad[0]:
                if ctx.dequantise:
                    w = torch.empty(
                        (out_features, in_features), dtype=grad_out.dtype, device=grad_out.device
                    )
                    gx = torch.matmul(grad_out, w)
                    del w
                else:
                    gx = grad_out.new_empty(grad_out.shape[:-1] + (in_features,))
            return gx, None, None, None, None

    return _QuantMatmul


_CLASS = None


def _stand_in_class():
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    import torch

    fn = _function()

    class QuantizedLinearStandIn(torch.nn.Module):
        """Packed data + metadata as uint8 parameters; forward as the format's kernel."""

        def __init__(self, in_features, out_features, fmt, data_bytes, meta_bytes, bias, device):
            super().__init__()
            self.in_features = in_features
            self.out_features = out_features
            self.fmt = fmt
            self.weight = torch.nn.Parameter(
                torch.empty(data_bytes, dtype=torch.uint8, device=device), requires_grad=False
            )
            self.quant_metadata = torch.nn.Parameter(
                torch.empty(meta_bytes, dtype=torch.uint8, device=device), requires_grad=False
            )
            self.bias = bias

        def forward(self, x):
            tokens = x.numel() // max(x.shape[-1], 1)
            dequantise = self.fmt in ALWAYS_DEQUANTISE or (
                self.fmt in LARGE_BATCH_DEQUANTISE and tokens >= LARGE_BATCH_TOKENS
            )
            return fn.apply(x, self.bias, self.out_features, self.in_features, dequantise)

        def extra_repr(self) -> str:
            return f"in={self.in_features}, out={self.out_features}, format={self.fmt}"

    _CLASS = QuantizedLinearStandIn
    return _CLASS


def make_quantized_linear(linear, fmt: str, quant, dtype):
    """A stand-in for `linear` (an nn.Linear) stored in `fmt`; `quant` is a ledger QuantParams."""
    import torch

    from vramtui.ledger.formats import linear_bytes

    fb = linear_bytes(fmt, linear.in_features, linear.out_features, False, quant)
    device = linear.weight.device
    bias = None
    if linear.bias is not None:
        bias = torch.nn.Parameter(
            torch.empty(linear.out_features, dtype=dtype, device=device), requires_grad=False
        )
    cls = _stand_in_class()
    return cls(
        linear.in_features,
        linear.out_features,
        fmt,
        fb.data_bytes,
        fb.metadata_bytes,
        bias,
        device,
    )


_STORED_CLASS = None


def _stored_class():
    global _STORED_CLASS
    if _STORED_CLASS is not None:
        return _STORED_CLASS
    import torch

    fn = _function()

    class StoredLinearStandIn(torch.nn.Module):
        """A pre-quantised checkpoint's linear: its stored tensors (names, shapes and dtypes
        as in the safetensors) as parameters; forward without a 16-bit weight copy."""

        def __init__(self, in_features, out_features, fmt, tensors, bias, device):
            super().__init__()
            self.in_features = in_features
            self.out_features = out_features
            self.fmt = fmt
            for name, shape, dtype in tensors:
                t = torch.empty(shape, dtype=getattr(torch, dtype), device=device)
                self.register_parameter(name, torch.nn.Parameter(t, requires_grad=False))
            self.bias = bias

        def forward(self, x):
            return fn.apply(x, self.bias, self.out_features, self.in_features, False)

        def extra_repr(self) -> str:
            return f"in={self.in_features}, out={self.out_features}, stored={self.fmt}"

    _STORED_CLASS = StoredLinearStandIn
    return _STORED_CLASS


def make_stored_linear(linear, fmt: str, tensors, dtype):
    """A stand-in for `linear` holding `tensors` [(name, shape, torch dtype name)], the
    checkpoint's stored tensors of that layer; the bias stays in the compute dtype."""
    import torch

    device = linear.weight.device
    bias = None
    if linear.bias is not None:
        bias = torch.nn.Parameter(
            torch.empty(linear.out_features, dtype=dtype, device=device), requires_grad=False
        )
    cls = _stored_class()
    return cls(linear.in_features, linear.out_features, fmt, tensors, bias, device)
