# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A STAND-IN for Huawei's torch_npu, for the lab only (never shipped, never installed on a node).

Put on a lab host's PYTHONPATH (Lab(host_env=...)), it makes `import torch_npu` succeed with a
version, as on an Ascend node, so the facts and pre-flight paths that ask for torch_npu run
end to end. It registers no device: torch.npu does not exist, exactly as on a node whose
torch_npu cannot see its NPUs; no collective can run on it.
"""

__version__ = "2.13.0.standin"
STAND_IN = True
