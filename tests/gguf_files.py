"""A tiny GGUF writer for tests (tests/models/test_gguf.py, tests/cli/test_fuzz_inputs.py): a Llama-layout file
(float32 tensors, a byte tokenizer of `vocab` tokens) written with the gguf package's GGUFWriter, in the order
llama.cpp writes it: the header's metadata, the tokenizer, then the tensors in the order given."""


def write_gguf(path, tensors, *, vocab, block_count, context_length, embedding_length, feed_forward_length,
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
