"""Hugging Face model families nobody here wrote, through minicompiler on the CPU: does each
capture whole, and does its eval forward match eager?

    python benchmarks/transformers_sweep.py [NAME ...]

Each model is built from a small config with random weights (nothing is downloaded) and run
twice compiled (the second call reuses the program), each output checked against eager's. One
line per model: the largest difference from eager over both calls, graphs, graph breaks (with
the first break's reason and line), graphs that fell back to torch, and calls run eagerly whole.
tests/models/test_transformers.py keeps the families that capture whole as tests.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import transformers as T

import minicompiler
from minicompiler.bench.capture_summary import capture_summary

V = 100  # vocabulary
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
TOKEN_IDS = dict(pad_token_id=1, bos_token_id=2, eos_token_id=3)  # inside the small vocabulary


def tokens(batch: int = 2, length: int = 12) -> torch.Tensor:
    return torch.randint(0, V, (batch, length))


def pixels() -> torch.Tensor:
    return torch.randn(2, 3, 32, 32)


SEQ2SEQ = dict(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, **TOKEN_IDS)
MODELS: dict[str, Callable[[], tuple[torch.nn.Module, dict[str, Any]]]] = {
    "t5": lambda: (T.T5Model(T.T5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)),
                   dict(input_ids=tokens(), decoder_input_ids=tokens(2, 5))),
    "bart": lambda: (T.BartModel(T.BartConfig(max_position_embeddings=64, **SEQ2SEQ)), dict(input_ids=tokens())),
    "whisper encoder": lambda: (T.WhisperModel(T.WhisperConfig(num_mel_bins=8, max_source_positions=16,
                                                               max_target_positions=16, decoder_start_token_id=2,
                                                               **SEQ2SEQ)).get_encoder(),
                                dict(input_features=torch.randn(2, 8, 32))),
    "qwen2": lambda: (T.Qwen2Model(T.Qwen2Config(vocab_size=V, num_key_value_heads=2, **SMALL)),
                      dict(input_ids=tokens())),
    "mistral": lambda: (T.MistralModel(T.MistralConfig(vocab_size=V, num_key_value_heads=2, sliding_window=4,
                                                       **SMALL)), dict(input_ids=tokens())),
    "gemma": lambda: (T.GemmaModel(T.GemmaConfig(vocab_size=V, num_key_value_heads=2, head_dim=8, **SMALL)),
                      dict(input_ids=tokens())),
    "phi": lambda: (T.PhiModel(T.PhiConfig(vocab_size=V, **SMALL)), dict(input_ids=tokens())),
    "gpt_neox": lambda: (T.GPTNeoXModel(T.GPTNeoXConfig(vocab_size=V, **SMALL)), dict(input_ids=tokens())),
    "falcon": lambda: (T.FalconModel(T.FalconConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
                                                    num_attention_heads=4)), dict(input_ids=tokens())),
    "roberta": lambda: (T.RobertaModel(T.RobertaConfig(vocab_size=V, **SMALL)),
                        dict(input_ids=tokens(), attention_mask=torch.ones(2, 12, dtype=torch.long))),
    "albert": lambda: (T.AlbertModel(T.AlbertConfig(vocab_size=V, embedding_size=16, **SMALL)),
                       dict(input_ids=tokens())),
    "clip text": lambda: (T.CLIPTextModel(T.CLIPTextConfig(vocab_size=V, max_position_embeddings=32, **SMALL,
                                                           **TOKEN_IDS)), dict(input_ids=tokens())),
    "clip vision": lambda: (T.CLIPVisionModel(T.CLIPVisionConfig(image_size=32, patch_size=8, **SMALL)),
                            dict(pixel_values=pixels())),
    "deit": lambda: (T.DeiTModel(T.DeiTConfig(image_size=32, patch_size=8, **SMALL)), dict(pixel_values=pixels())),
    "swin": lambda: (T.SwinModel(T.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                                              num_heads=[2, 2], window_size=4)), dict(pixel_values=pixels())),
    "convnext": lambda: (T.ConvNextModel(T.ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2)),
                         dict(pixel_values=pixels())),
    "resnet": lambda: (T.ResNetModel(T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1])),
                       dict(pixel_values=pixels())),
    "segformer": lambda: (T.SegformerModel(T.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                                                             hidden_sizes=[8, 16], num_attention_heads=[1, 2],
                                                             patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2])),
                          dict(pixel_values=pixels())),
}


def main_output(output: Any) -> torch.Tensor:
    return output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]


def sweep(name: str) -> str:
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    compiled = minicompiler.compile(model.eval())
    with torch.no_grad():
        expected = main_output(model(**inputs))
        error = max(float((main_output(compiled(**inputs)) - expected).abs().max()) for _ in range(2))
    return f"{name:16} max |compiled - eager| {error:.1e}  {capture_summary(compiled, 16)}"


if __name__ == "__main__":
    print(f"transformers {T.__version__}, torch {torch.__version__}, Python {sys.version.split()[0]}, CPU, eval")
    for model_name in sys.argv[1:] or MODELS:
        print(sweep(model_name), flush=True)
