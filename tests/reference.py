"""Reference formulas the tests hold the product to: the papers' parameter counts, written out in closed form, and the
ARC augmentation as the builder's spec states it. Nothing in hrm_reason needs them; each test ties one to
sum(p.numel()) of a module, to a number a paper prints, or to the product's inverse."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from hrm_reason.models.lm.ham import HAMLMConfig
from hrm_reason.models.lm.hrm_text import HRMTextConfig
from hrm_reason.tasks.dihedral import dihedral_transform

# ------------------------------------------------------------------------------------- HRM-LM and UniTF-LM (A.8)


def causal_attn_block_param_count(d: int) -> int:
    """W_qkv 3d^2 + W_o d^2 + W_1, W_2 8d^2 + W_3 4d^2 + gamma_1, gamma_2 2d (the paper's Eq. 28 says 14d^2: a slip)."""
    return 16 * d * d + 2 * d


def transformer_lm_param_count(V: int, d: int, L: int) -> int:
    """T-L baseline: tied embedding plus L independent blocks."""
    return V * d + L * causal_attn_block_param_count(d)


def unitf_lm_param_count(V: int, d: int) -> int:
    """Vd + 16d^2 + 2d: the tied embedding plus one block, as a one-layer transformer."""
    return transformer_lm_param_count(V, d, L=1)


def hrm_lm_param_count(V: int, d: int, fast_ctx_norm: bool = True, out_proj: bool = True) -> int:
    """Vd + 3(16d^2+2d) + (7d^2+3d+1) + (5d^2+2d+1) + (d^2+12d+1) = Vd + 61d^2 + 23d + 3 with both flags on."""
    P_L = 6 * d * d + d * d + 1 + (3 * d if fast_ctx_norm else 0)  # W_g, W_in (3d x d each), W_out, alpha, [ctx norm]
    P_H = 4 * d * d + d * d + 1 + 2 * d  # W_g^H, W_in^H (2d x d each), W_out^H, alpha_H, ctx norm over 2d
    P_out = 3 * d + 9 * d + 1 + (d * d if out_proj else 0)  # three norm scales, W_og (3d x 3), tau, [projection]
    return V * d + 3 * causal_attn_block_param_count(d) + P_L + P_H + P_out


# ---------------------------------------------------------------------------------------------------------- HAM


def ham_num_parameters(config: HAMLMConfig) -> int:
    """The paper's parameter-count table, in general form, for the shallow/fit_error routers.

    Per layer: (d + 2 d_conv + 2)(2 d_QK + d_V) + d (3 h_RNN + h_KV + 2 d_V + 1) + 2 h_RNN + d_v^RNN + d_v^KV
    + 1[learnable tau] + d 1[learned router]; the FFN adds 3 d I + d; the model adds (2V + 1) d.
    EDA adds one gamma per layer after the first.
    """
    if config.router == "input_deep":
        raise ValueError("the paper's table has no deep router")
    d, dqk, dv, c = config.hidden_size, config.qk_dim, config.v_dim, config.conv_size
    h_rnn, h_kv = config.num_rnn_heads, config.num_kv_heads
    mixer = (
        (d + 2 * c + 2) * (2 * dqk + dv)
        + d * (3 * h_rnn + h_kv + 2 * dv + 1)
        + 2 * h_rnn
        + config.rnn_head_v_dim
        + config.kv_head_v_dim
        + int(config.threshold_mode != "fixed")
        + d * int(config.router == "input_shallow")
    )
    ffn = 3 * d * config.ffn_size + d
    eda = (config.num_layers - 1) if config.eda else 0
    return config.num_layers * (mixer + ffn) + eda + (2 * config.vocab_size + 1) * d


def ham_paper_mixer_formula(d: int) -> Fraction:
    """(8345/1792) d^2 + (23301/896) d + 576: the paper's simplified per-layer mixer count (fit_error, fixed tau)."""
    return Fraction(8345, 1792) * d * d + Fraction(23301, 896) * d + 576


# ----------------------------------------------------------------------------------------------------- HRM-Text


def hrm_text_param_count(config: HRMTextConfig) -> int:
    """sum(p.numel()) by formula: per layer 4*d*h*d_h (q, k, v, gate) + h*d_h*d (o) + 3*d*I (MLP)."""
    d, i, hd = config.hidden_size, config.intermediate_size, config.num_attention_heads * config.head_dim
    per_layer = 5 * d * hd + 3 * d * i
    if config.attention_bias:
        per_layer += 4 * hd + d
    if config.mlp_bias:
        per_layer += 2 * i + d
    embeddings = config.vocab_size * d * (1 if config.tie_word_embeddings else 2)
    return embeddings + 2 * config.num_layers_per_stack * per_layer


# ---------------------------------------------------------------------------------------------------------- ARC


def augment_grid(grid: np.ndarray, t: int, colours: np.ndarray) -> np.ndarray:
    """Colour map, then dihedral transform t (they commute): `dihedral_transform(colours[grid], t)`."""
    return dihedral_transform(colours[grid], t)
