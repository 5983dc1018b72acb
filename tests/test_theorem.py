"""The paper's theorem, checked exactly on a tabular autoregressive policy (docs/DESIGN.md §1).

Vocabulary {0, 1, END = 2}; a response stops at END or after MAX_LEN tokens, so the
sequences are: any 0/1 string of length < MAX_LEN followed by END, plus every 0/1
string of length MAX_LEN − 1 followed by any token (31 in all for MAX_LEN = 4).
Student and teacher each have one softmax over the 3 tokens per 0/1 prefix
(15 prefixes). With γ = 1, no baseline and no normalisation:

    E_y[ Σ_t ∇log π_S(y_t|h_t) · Σ_t' f_t' ] = −∇_θ KL(π_S ‖ π_T)     (broadcast raw sum)
    E_y[ Σ_t ∇log π_S(y_t|h_t) · f_t ]        ≠ −∇_θ KL(π_S ‖ π_T)     (vanilla OPD)

where KL is the sequence-level reverse KL, computed here by autograd over the
enumerated distribution, independently of the credit code under test.
"""

import itertools

import torch

from gropd.credit import broadcast, opd_advantages, token_feedback, trajectory_scores

D = torch.float64
END, MAX_LEN = 2, 4
PREFIXES = [p for n in range(MAX_LEN) for p in itertools.product((0, 1), repeat=n)]
PREFIX_INDEX = {p: i for i, p in enumerate(PREFIXES)}


def all_sequences():
    """Every complete response, as a tuple of token ids."""
    ended = [p + (END,) for p in PREFIXES]
    capped = [p + (a,) for p in PREFIXES if len(p) == MAX_LEN - 1 for a in (0, 1)]
    return ended + capped


def padded_batch(sequences):
    """`(tokens, prefix_ids, mask)`, each `[N, MAX_LEN]`, right-padded."""
    N = len(sequences)
    tokens = torch.zeros(N, MAX_LEN, dtype=torch.long)
    prefix_ids = torch.zeros(N, MAX_LEN, dtype=torch.long)
    mask = torch.zeros(N, MAX_LEN, dtype=D)
    for i, y in enumerate(sequences):
        for t, token in enumerate(y):
            tokens[i, t], prefix_ids[i, t], mask[i, t] = token, PREFIX_INDEX[y[:t]], 1.0
    return tokens, prefix_ids, mask


def token_logprobs(logits, tokens, prefix_ids):
    """`log π(y_t | h_t)` per position `[N, MAX_LEN]` (padding positions hold junk)."""
    return torch.log_softmax(logits, dim=-1)[prefix_ids, tokens]


SEQUENCES = all_sequences()
TOKENS, PREFIX_IDS, MASK = padded_batch(SEQUENCES)


def make_policies(seed=0):
    gen = torch.Generator().manual_seed(seed)
    student = torch.randn(len(PREFIXES), 3, generator=gen, dtype=D).requires_grad_()
    teacher = 1.5 * torch.randn(len(PREFIXES), 3, generator=gen, dtype=D)
    return student, teacher


def sequence_logprob(logits):
    return (token_logprobs(logits, TOKENS, PREFIX_IDS) * MASK).sum(dim=1)


def exact_negative_kl_gradient(student, teacher):
    """`−∇_θ Σ_y π_S(y) (log π_S(y) − log π_T(y))` by autograd."""
    log_p, log_q = sequence_logprob(student), sequence_logprob(teacher)
    kl = (log_p.exp() * (log_p - log_q)).sum()
    (grad,) = torch.autograd.grad(kl, student)
    return -grad


def broadcast_raw_sum(f):
    """GR-OPD's credit without baseline or normalisation: `A_{y,t} = S_y`, γ = 1."""
    return broadcast(trajectory_scores(f, MASK, gamma=1.0), MASK)


def vanilla_per_token(f):
    """Vanilla OPD's credit `A_{y,t} = f_{y,t}`."""
    return opd_advantages(f, MASK)


def feedback_to_go(f):
    """`A_{y,t} = Σ_{t' ≥ t} f_{y,t'}` (right padding holds f = 0), written here by hand."""
    return f.flip(1).cumsum(1).flip(1)


def estimator_terms(student, teacher, credit):
    """Per-sequence surrogate `Σ_t A_{y,t} log π_S(y_t|h_t)` `[N]`, whose gradient is the
    estimator's value on y; `A = credit(f)` with `f` from the project's `token_feedback`."""
    student_lp = token_logprobs(student, TOKENS, PREFIX_IDS)
    teacher_lp = token_logprobs(teacher, TOKENS, PREFIX_IDS)
    A = credit(token_feedback(teacher_lp, student_lp, MASK))
    return (A * student_lp).sum(dim=1)


def expected_estimator(student, teacher, credit, weights=None):
    """`Σ_y w_y ∇(Σ_t A_{y,t} log π_S)`; `w = π_S` (exact expectation) unless given."""
    if weights is None:
        weights = sequence_logprob(student).exp().detach()
    (grad,) = torch.autograd.grad((weights * estimator_terms(student, teacher, credit)).sum(), student)
    return grad


def test_enumerated_distributions_sum_to_one():
    assert len(SEQUENCES) == 31 and len(set(SEQUENCES)) == 31
    student, teacher = make_policies()
    for logits in (student, teacher):
        assert abs(sequence_logprob(logits).exp().sum().item() - 1.0) < 1e-14


def test_broadcast_raw_sum_is_the_exact_sequence_kl_gradient():
    for seed in range(3):
        student, teacher = make_policies(seed)
        exact = exact_negative_kl_gradient(student, teacher)
        estimate = expected_estimator(student, teacher, broadcast_raw_sum)
        assert exact.abs().max() > 0.05  # a non-trivial gradient
        assert torch.allclose(estimate, exact, rtol=0, atol=1e-8)


def test_vanilla_per_token_estimator_is_not_that_gradient():
    student, teacher = make_policies(0)
    exact = exact_negative_kl_gradient(student, teacher)
    vanilla = expected_estimator(student, teacher, vanilla_per_token)
    # measured: ‖vanilla − exact‖ / ‖exact‖ ≈ 0.44, max |vanilla − exact| ≈ 0.24 for this
    # seed, against ≈ 2e-16 for the broadcast estimator
    assert ((vanilla - exact).norm() / exact.norm()).item() > 0.3
    assert (vanilla - exact).abs().max() > 0.1
    # what vanilla OPD drops is the later feedback: crediting y_t with Σ_{t' ≥ t} f_t'
    # (earlier feedback has zero expected contribution) recovers the exact gradient
    assert torch.allclose(expected_estimator(student, teacher, feedback_to_go), exact, rtol=0, atol=1e-8)


def test_monte_carlo_average_lands_near_the_exact_gradient():
    """N samples from π_S; the tolerance is 5 standard errors per coordinate, the
    standard error computed exactly from the enumerated per-sequence gradients."""
    student, teacher = make_policies(1)
    exact = exact_negative_kl_gradient(student, teacher)
    p = sequence_logprob(student).exp().detach()
    terms = estimator_terms(student, teacher, broadcast_raw_sum)
    per_sequence = torch.stack(
        [torch.autograd.grad(terms[i], student, retain_graph=True)[0] for i in range(len(SEQUENCES))]
    )  # [31, 15, 3]
    variance = (p[:, None, None] * per_sequence**2).sum(0) - exact**2
    n = 20_000
    draws = torch.multinomial(p, n, replacement=True, generator=torch.Generator().manual_seed(7))
    weights = torch.bincount(draws, minlength=len(SEQUENCES)).to(D) / n
    monte_carlo = expected_estimator(student, teacher, broadcast_raw_sum, weights)
    standard_error = (variance / n).sqrt()
    # measured: worst coordinate 1.7 standard errors, max |error| ≈ 0.015 (max |exact| ≈ 0.81)
    assert torch.all((monte_carlo - exact).abs() <= 5 * standard_error + 1e-12)
    assert (monte_carlo - exact).abs().max() < 0.05
