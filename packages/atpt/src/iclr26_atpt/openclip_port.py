"""Port a `transformers` CLIP (ViT image tower, quick-GELU, as the toy) into an ``open_clip`` CLIP with the same
weights, so `reproduce` can run the same TPT / A-TPT episodes on a second CLIP runtime (the open_clip bench row).

Mapping: token / position embeddings → ``token_embedding`` / ``positional_embedding``; each encoder layer's
q/k/v projections → ``attn.in_proj_*`` (concatenated), ``out_proj``, ``layer_norm1/2`` → ``ln_1/2``, ``fc1/fc2`` →
``mlp.c_fc/c_proj``; ``final_layer_norm`` → ``ln_final``; the projections' weights transposed into ``proj`` /
``text_projection``; ``pre_layrnorm`` / ``post_layernorm`` → ``ln_pre`` / ``ln_post``; pooling at the tokenizer's
EOS id (``pool_type="eos"``).
"""

from __future__ import annotations

import torch

from .openclip import import_open_clip
from .validate import AtptError


def _copy_layers(hf_layers, oc_blocks) -> None:
    for hf, oc in zip(hf_layers, oc_blocks, strict=True):
        a = hf.self_attn
        oc.attn.in_proj_weight.copy_(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
        oc.attn.in_proj_bias.copy_(torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]))
        oc.attn.out_proj.load_state_dict(a.out_proj.state_dict())
        oc.ln_1.load_state_dict(hf.layer_norm1.state_dict())
        oc.ln_2.load_state_dict(hf.layer_norm2.state_dict())
        oc.mlp.c_fc.load_state_dict(hf.mlp.fc1.state_dict())
        oc.mlp.c_proj.load_state_dict(hf.mlp.fc2.state_dict())


def hf_to_open_clip(hf_clip, image_mean=None, image_std=None):
    """An ``open_clip.model.CLIP`` with the weights of a `transformers` ``CLIPModel`` (quick-GELU ViT towers);
    ``image_mean`` / ``image_std`` (the HF processor's) go into the model's preprocess config."""
    import_open_clip()
    from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg

    tc, vc = hf_clip.config.text_config, hf_clip.config.vision_config
    if tc.hidden_act != "quick_gelu" or vc.hidden_act != "quick_gelu":
        raise AtptError("hf_to_open_clip ports quick-GELU CLIPs only (open_clip's quick_gelu=True)")
    model = CLIP(
        embed_dim=hf_clip.config.projection_dim,
        vision_cfg=CLIPVisionCfg(
            layers=vc.num_hidden_layers,
            width=vc.hidden_size,
            head_width=vc.hidden_size // vc.num_attention_heads,
            mlp_ratio=vc.intermediate_size / vc.hidden_size,
            patch_size=vc.patch_size,
            image_size=vc.image_size,
        ),
        text_cfg=CLIPTextCfg(
            context_length=tc.max_position_embeddings,
            vocab_size=tc.vocab_size,
            width=tc.hidden_size,
            heads=tc.num_attention_heads,
            layers=tc.num_hidden_layers,
            mlp_ratio=tc.intermediate_size / tc.hidden_size,
            pool_type="eos",
            eos_id=tc.eos_token_id,
        ),
        quick_gelu=True,
    )
    t, v = hf_clip.text_model, hf_clip.vision_model
    with torch.no_grad():
        model.token_embedding.weight.copy_(t.embeddings.token_embedding.weight)
        model.positional_embedding.copy_(t.embeddings.position_embedding.weight)
        _copy_layers(t.encoder.layers, model.transformer.resblocks)
        model.ln_final.load_state_dict(t.final_layer_norm.state_dict())
        model.text_projection.copy_(hf_clip.text_projection.weight.T)
        vis = model.visual
        vis.conv1.weight.copy_(v.embeddings.patch_embedding.weight)
        vis.class_embedding.copy_(v.embeddings.class_embedding)
        vis.positional_embedding.copy_(v.embeddings.position_embedding.weight)
        vis.ln_pre.load_state_dict(v.pre_layrnorm.state_dict())
        _copy_layers(v.encoder.layers, vis.transformer.resblocks)
        vis.ln_post.load_state_dict(v.post_layernorm.state_dict())
        vis.proj.copy_(hf_clip.visual_projection.weight.T)
        model.logit_scale.copy_(hf_clip.logit_scale)
    if image_mean is not None and image_std is not None:
        model.visual.preprocess_cfg = {"mean": list(image_mean), "std": list(image_std)}
    return model.eval()
