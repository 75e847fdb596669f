"""The puzzle-embedding table: a large buffer trained row-sparsely by SignSGD instead of Adam.

Only the rows of the current batch get a gradient, so in training the rows are copied into a fresh leaf tensor
(`local_weights`) whose gradient the SignSGD step scatters back into the table. The table is a buffer, not a
Parameter: it is saved in checkpoints but not counted in the parameter total (the paper's "27M").
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from hrm_reason.models.layers import trunc_normal_init_


class SparsePuzzleEmbedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, init_std: float, cast_to: torch.dtype) -> None:
        super().__init__()
        self.cast_to = cast_to
        self.weights = nn.Buffer(trunc_normal_init_(torch.empty(num_embeddings, embedding_dim), std=init_std))
        self.local_weights: torch.Tensor | None = None
        self.local_ids: torch.Tensor | None = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return self.weights[ids].to(self.cast_to)
        if torch.is_grad_enabled():
            # A leaf of its own: its .grad is the sparse gradient of exactly these rows.
            self.local_weights = self.weights[ids].detach().requires_grad_(True)
            self.local_ids = ids
            return self.local_weights.to(self.cast_to)
        return self.weights[ids].to(self.cast_to)


class SparseSignSGD:
    """p <- p * (1 - lr * wd) - lr * sign(sum of grads of that row), only for rows seen in the (global) batch."""

    def __init__(self, embedding: SparsePuzzleEmbedding, lr: float, weight_decay: float) -> None:
        self.embedding = embedding
        self.lr = lr
        self.weight_decay = weight_decay

    @torch.no_grad()
    def step(self) -> None:
        emb = self.embedding
        if emb.local_weights is None or emb.local_weights.grad is None:
            return
        grad, ids = emb.local_weights.grad, emb.local_ids
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            world = dist.get_world_size()
            all_grad = grad.new_empty((world * grad.shape[0], *grad.shape[1:]))
            all_ids = ids.new_empty((world * ids.shape[0],))
            dist.all_gather_into_tensor(all_grad, grad.contiguous())
            dist.all_gather_into_tensor(all_ids, ids.contiguous())
            grad, ids = all_grad, all_ids
        unique_ids, inverse = ids.unique(return_inverse=True)
        row_grad = grad.new_zeros((unique_ids.shape[0], grad.shape[1])).index_add_(0, inverse, grad)
        rows = emb.weights[unique_ids]
        rows.mul_(1.0 - self.lr * self.weight_decay).add_(row_grad.sign(), alpha=-self.lr)
        emb.weights[unique_ids] = rows

    def zero_grad(self) -> None:
        self.embedding.local_weights = None
        self.embedding.local_ids = None
