"""A compiled optimizer step (seed 002): Adam, AdamW and SGD updates as one captured program.

Capturing `opt.step` itself stops at torch's own bookkeeping (`record_function` profiling blocks,
`.item()` on step counters, the foreach/fused dispatch), so the step runs eagerly. Instead, the
update is written here as plain tensor math over lists of tensors,

    adam_update(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, eps, ...)

and that function is compiled: capture unrolls the loop over parameters into one graph, and
fusion turns each parameter's update into one kernel that reads parameter, gradient and state
once and writes them once (eager torch runs about ten small ops per parameter).

The optimizer object stays the source of truth: state is kept under torch's own keys ("step",
"exp_avg", "exp_avg_sq", "momentum_buffer"), so `opt.state_dict()` and later eager steps see the
same values. Hyperparameters are read from `param_groups` on every call and are constants of the
graph: changing the learning rate (a scheduler) recompiles.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from minicompiler.api import compile as compile_function

Tensors = list[torch.Tensor]


def adam_update(params: Tensors, grads: Tensors, exp_avgs: Tensors, exp_avg_sqs: Tensors, steps: Tensors,
                lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool) -> None:
    """torch.optim.Adam (decoupled=False: L2 added to the gradient) or AdamW (decoupled weight decay)."""
    for p, g, m, v, step in zip(params, grads, exp_avgs, exp_avg_sqs, steps, strict=True):
        step.add_(1)
        if decoupled:
            p.mul_(1 - lr * weight_decay)
        elif weight_decay != 0:
            g = g + weight_decay * p
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        bias_correction1 = 1 - torch.pow(beta1, step)
        bias_correction2 = 1 - torch.pow(beta2, step)
        denom = (v / bias_correction2).sqrt() + eps
        p.sub_(lr * (m / bias_correction1) / denom)


def sgd_update(params: Tensors, grads: Tensors, buffers: Tensors, lr: float, momentum: float, dampening: float,
               weight_decay: float, nesterov: bool, first_step: bool) -> None:
    """torch.optim.SGD. On the first step the momentum buffer becomes the (decayed) gradient, as in torch."""
    for p, g, buf in zip(params, grads, buffers, strict=True):
        if weight_decay != 0:
            g = g + weight_decay * p
        if momentum != 0:
            if first_step:
                buf.copy_(g)
            else:
                buf.mul_(momentum).add_(g, alpha=1 - dampening)
            g = g + momentum * buf if nesterov else buf
        p.sub_(lr * g)


def _unwritten(group: dict[str, Any]) -> str | None:
    """Why this param group's settings are not written here, if they are not."""
    unsupported = [k for k in ("amsgrad", "maximize", "differentiable", "capturable") if group.get(k)]
    if unsupported or isinstance(group["lr"], torch.Tensor):
        return f"{', '.join(unsupported) or 'a tensor lr'} is not written"
    return None


def _detached(params: Tensors) -> Tensors:
    """The same storage, updated in place without autograd's check on leaves that require grad."""
    return [p.detach() for p in params]


class CompiledOptimizerStep:
    """`step()` runs `optimizer`'s update through the compiled functional form above. What is not
    written here (another optimizer, amsgrad, a tensor lr...) runs torch's own step, with a warning
    that says why (`.fallback`)."""

    def __init__(self, optimizer: torch.optim.Optimizer, **options: Any) -> None:
        self.optimizer = optimizer
        kind = type(optimizer)
        self.fallback: str | None = None  # why the last step ran torch's own step (warned once per reason)
        self._unwritten_kind = None if kind in (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD) else (
            f"{kind.__name__}: only Adam, AdamW and SGD updates are written")
        update = sgd_update if kind is torch.optim.SGD else adam_update
        self.update = compile_function(update, **options)

    @property
    def report(self) -> Any:
        """The compiled update's CompileReport (its graphs and kernels), after the first step."""
        return self.update.report

    def __call__(self, closure: Callable[[], Any] | None = None) -> Any:
        """As `Optimizer.step`: `closure` (re-evaluating the loss) runs first, with gradients on."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._step()
        return loss

    @torch.no_grad()
    def _step(self) -> None:
        reason = self._unwritten_kind or next(filter(None, map(_unwritten, self.optimizer.param_groups)), None)
        if reason is not None:
            if reason != self.fallback:
                warnings.warn(f"compiled optimizer step runs torch's own step: {reason}", stacklevel=3)
            self.fallback = reason
            self.optimizer.step()
            return
        self.fallback = None
        for group in self.optimizer.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._step_group(group, params)

    def _step_group(self, group: dict[str, Any], params: Tensors) -> None:
        grads = [p.grad for p in params]
        if isinstance(self.optimizer, torch.optim.SGD):
            self._step_sgd(group, params, grads)
            return
        states = [self.optimizer.state[p] for p in params]
        for state, p in zip(states, params, strict=True):
            if not state:  # torch's initial state, under torch's keys
                state.update(step=torch.tensor(0.0), exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
        beta1, beta2 = group["betas"]
        self.update(_detached(params), grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
                    [s["step"] for s in states], group["lr"], beta1, beta2, group["eps"], group["weight_decay"],
                    isinstance(self.optimizer, torch.optim.AdamW) or group.get("decoupled_weight_decay", False))

    def _step_sgd(self, group: dict[str, Any], params: Tensors, grads: Tensors) -> None:
        first_step, states = False, []
        if group["momentum"] != 0:  # torch keeps a buffer only with momentum
            states = [self.optimizer.state[p] for p in params]
            first_step = "momentum_buffer" not in states[0]
            if first_step:  # the first step copies the gradient into it
                for state, g in zip(states, grads, strict=True):
                    state["momentum_buffer"] = torch.zeros_like(g)
        buffers = [s["momentum_buffer"] for s in states] if group["momentum"] != 0 else grads
        self.update(_detached(params), grads, buffers, group["lr"], group["momentum"], group["dampening"],
                    group["weight_decay"], group["nesterov"], first_step)


def compile_optimizer(optimizer: torch.optim.Optimizer, **options: Any) -> CompiledOptimizerStep:
    """A `step()` for `optimizer` whose updates run as compiled kernels (options as for `compile`);
    `minicompiler.compile(optimizer.step)` returns the same."""
    return CompiledOptimizerStep(optimizer, **options)
