"""Tiny GGUF files for tests (tests/models/test_gguf.py, tests/scaling/test_growth.py, tests/cli/test_fuzz_inputs.py):
a Llama-layout file (float32 tensors, a byte tokenizer of `vocab` tokens) written with the gguf package's GGUFWriter,
in the order llama.cpp writes it: the header's metadata, the tokenizer, then the tensors in the order given
(write_tensors); and the same for the state dict of a small transformers LlamaForCausalLM or Qwen2ForCausalLM of the
sizes below (write_gguf)."""

V, H, LAYERS, NH, NKV, F, P = 96, 32, 2, 4, 2, 64, 64     # vocabulary, hidden, layers, heads, key heads, FFN, positions


def write_tensors(path, tensors, *, vocab, block_count, context_length, embedding_length, feed_forward_length,
                  head_count, head_count_kv, arch="llama"):
    """Write path and return it: tensors maps GGUF tensor names (token_embd.weight, blk.0.attn_q.weight, ...)
    to float32 arrays; the other arguments are the header's metadata."""
    import gguf            # imported here: the tests that use it skip without the package (pytest.importorskip)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(block_count)
    w.add_context_length(context_length)
    w.add_embedding_length(embedding_length)
    w.add_feed_forward_length(feed_forward_length)
    w.add_head_count(head_count)
    w.add_head_count_kv(head_count_kv)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(vocab - 3)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([2, 3, 3] + [6] * (vocab - 3))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    for name, array in tensors.items():
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def rotary_permute(w, heads):
    """llama.cpp's conversion of a query/key projection (rows grouped per head as interleaved pairs)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path, sd, arch="llama", **override):
    """A GGUF file of the state dict sd of a LlamaForCausalLM of the sizes above (float32 tensors, a byte
    tokenizer), in llama.cpp's layout; override changes the header's metadata (head_count=3, ...)."""
    meta = {"block_count": LAYERS, "context_length": P, "embedding_length": H, "feed_forward_length": F,
            "head_count": NH, "head_count_kv": NKV, **override}
    permute = rotary_permute if arch == "llama" else (lambda x, heads: x)      # llama.cpp permutes llama only
    tensors = {"token_embd.weight": sd["model.embed_tokens.weight"]}
    for i in range(LAYERS):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        tensors[b + "attn_norm.weight"] = sd[p + "input_layernorm.weight"]
        tensors[b + "attn_q.weight"] = permute(sd[p + "self_attn.q_proj.weight"], NH)
        tensors[b + "attn_k.weight"] = permute(sd[p + "self_attn.k_proj.weight"], NKV)
        tensors[b + "attn_v.weight"] = sd[p + "self_attn.v_proj.weight"]
        for x in "qkv":                                                       # Qwen2's projection biases
            if p + f"self_attn.{x}_proj.bias" in sd:
                tensors[b + f"attn_{x}.bias"] = sd[p + f"self_attn.{x}_proj.bias"]
        tensors[b + "attn_output.weight"] = sd[p + "self_attn.o_proj.weight"]
        tensors[b + "ffn_norm.weight"] = sd[p + "post_attention_layernorm.weight"]
        tensors[b + "ffn_gate.weight"] = sd[p + "mlp.gate_proj.weight"]
        tensors[b + "ffn_up.weight"] = sd[p + "mlp.up_proj.weight"]
        tensors[b + "ffn_down.weight"] = sd[p + "mlp.down_proj.weight"]
    tensors["output_norm.weight"] = sd["model.norm.weight"]
    tensors["output.weight"] = sd["lm_head.weight"]
    return write_tensors(path, tensors, vocab=V, arch=arch, **meta)
