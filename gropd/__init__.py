"""GR-OPD: group-relative sequence credit for on-policy distillation (reference implementation).

Importing the package, before torch loads, caps oneDNN at the level of a lowered ATen capability
(gropd/numerics.py cap_onednn_to_aten), so that every entry point (`python -m gropd...`, the test suite, the
teacher server) computes under `ATEN_CPU_CAPABILITY=avx2` or `=default` alone."""

from gropd.numerics import cap_onednn_to_aten

cap_onednn_to_aten()
