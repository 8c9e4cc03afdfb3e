"""The optional packages engines and scenarios need, and the exact line that installs them.

A missing package skips the case with that line; nothing is ever installed at run time.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from accelbench.core.measurement import CaseSkipped

# import name -> (distribution, the pip line that brings it)
EXTRAS = {
    "onnx": ("onnx", "pip install 'accelbench[onnx]'"),
    "onnxruntime": ("onnxruntime", "pip install 'accelbench[onnx]'"),
    "onnxscript": ("onnxscript", "pip install 'accelbench[onnx]'"),
    "torchao": ("torchao", "pip install 'accelbench[quant]'"),
    "mlperf_loadgen": ("mlcommons-loadgen", "pip install 'accelbench[serving]'"),
    "aiohttp": ("aiohttp", "pip install 'accelbench[serving]'"),
    "diffusers": ("diffusers", "pip install 'accelbench[diffusion]'"),
}


def install_line(module: str) -> str:
    return EXTRAS.get(module, (module, f"pip install {module}"))[1]


def require(module: str, what: str) -> ModuleType:
    """The module, imported; CaseSkipped naming the pip line when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = (exc.name or module).split(".")[0]
        if missing != module.split(".")[0]:
            raise  # the package is there but broken: a failure, not a skip
        distribution, line = EXTRAS.get(missing, (missing, f"pip install {missing}"))
        raise CaseSkipped(f"{what} needs {distribution}, which is not installed: "
                          f"{line}") from None
