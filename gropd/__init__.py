"""GR-OPD: group-relative sequence credit for on-policy distillation (reference implementation)."""
