//! Checks `llmrt::sys` against the real `llm.h`: the test reads the header's
//! struct fields and constants, builds a C probe that prints their sizes,
//! offsets and values, and compares with the Rust mirror. A field or constant
//! added to the header without its Rust counterpart fails here.
//!
//! Needs a C compiler (`$CC`, default `cc`). The header is
//! `$LLMRT_INCLUDE_DIR/llm.h`, default `../../include/llm.h`.

use llmrt::sys;
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// (struct, size, [(field, offset, size)]) of the Rust mirror. `type_` is
/// `type` in C.
macro_rules! mirror {
    ($($s:ident { $($f:ident),* $(,)? })*) => {
        vec![$((
            stringify!($s).to_string(),
            size_of::<sys::$s>(),
            vec![$((
                stringify!($f).trim_end_matches('_').to_string(),
                offset_of!(sys::$s, $f),
                field_size(|x: &sys::$s| &x.$f),
            )),*],
        )),*]
    };
}

macro_rules! constants {
    ($($c:ident),* $(,)?) => {
        vec![$((stringify!($c).to_string(), sys::$c as i64 as u64)),*]
    };
}

type Layout = Vec<(String, usize, Vec<(String, usize, usize)>)>;

fn rust_layout() -> Layout {
    mirror! {
        llm_ctx_params { struct_size, backend, model_path, n_threads, n_ctx, kv_block_size, n_kv_blocks,
                         max_seqs, max_batch_tokens, max_queued, preempt_mode, draft_model_path,
                         self_draft_layers, spec_mode, spec_k, reserved1, gpu_memory_fraction, reserved2,
                         swap_space_bytes, kv_type, kv_type_v, n_gpu_layers, reserved4, kv_host_bytes,
                         kv_disk_dir, kv_disk_bytes, kv_role, kv_lease_ms, kv_listen_addr,
                         n_cpu_moe, moe_host_policy, moe_cache_bytes, moe_prefetch, reserved5, main_gpu,
                         tensor_split, reserved6, mmproj_path }
        llm_content_part { struct_size, kind, text, data, n_data, width, height }
        llm_chat_message_v2 { struct_size, n_parts, role, parts }
        llm_device_stats { struct_size, device, first_layer, end_layer, n_devices, reserved, weight_bytes,
                           kv_pool_bytes, used_bytes, total_bytes }
        llm_sampling_params { struct_size, temperature, top_k, top_p, min_p, repetition_penalty,
                              frequency_penalty, presence_penalty, penalty_last_n, seed, logit_bias, n_logit_bias,
                              reserved1 }
        llm_logit_bias { token, bias }
        llm_top_logprob { token, logprob }
        llm_metrics { prompt_tokens, cached_prompt_tokens, generated_tokens, draft_tokens_proposed,
                      draft_tokens_accepted, preemptions, queue_ms, ttft_ms, tpot_ms, total_ms }
        llm_event { struct_size, type_, request_id, seq_index, token, text, text_len, logprob, finish_reason,
                    status, message, metrics, prompt_logprobs, n_prompt_logprobs, reserved0, top_logprobs,
                    n_top_logprobs, reserved1, embedding, n_embedding, n_embedding_rows, kv_transfer_desc,
                    transferred_prompt_tokens, kv_transfer_status, reasoning_text, reasoning_text_len, part }
        llm_request { struct_size, tokenize_flags, prompt, prompt_tokens, n_prompt_tokens, max_tokens, sampling,
                      stop, n_stop, ignore_eos, n, priority, prompt_logprobs, reserved0, callback, user_data,
                      cache_salt, spec_mode, spec_k, stop_token_ids, n_stop_token_ids, min_tokens, top_logprobs,
                      reserved1, constraint_kind, n_choices, constraint, choices, task, pooling, normalize,
                      dimensions, truncate, reserved2, keep_kv, constraint_whitespace, kv_transfer_desc, kv_produce, reserved4,
                      reasoning_format, reserved5, parts, n_parts, reserved6 }
        llm_stats { struct_size, backend, requests_submitted, requests_finished, prompt_tokens, generated_tokens,
                    steps, queue_depth, running, kv_blocks_total, kv_blocks_used, kv_blocks_free,
                    kv_blocks_cached, uptime_s, prompt_tokens_per_s, generated_tokens_per_s,
                    prefix_cache_queried_tokens, prefix_cache_hit_tokens, preemptions, waiting, reserved1,
                    kv_utilization, draft_tokens_proposed, draft_tokens_accepted, spec_rounds, swap_outs,
                    swap_ins, swap_blocks_out, swap_blocks_in, swap_blocks_total, swap_blocks_used,
                    kv_bytes, kv_pool_bytes, weight_bytes, scratch_bytes, kv_tier_host_hit_tokens,
                    kv_tier_disk_hit_tokens, kv_tier_bytes_down, kv_tier_bytes_up, kv_tier_host_bytes,
                    kv_tier_disk_bytes, kv_tier_files_refused, kv_imports_refused, kv_tier_disk_on, reserved2,
                    kv_xfer_pulls, kv_xfer_fallbacks, kv_xfer_bytes, kv_xfer_tokens, kv_xfer_seconds,
                    kv_xfer_served, kv_xfer_bytes_served, kv_leases_expired, kv_lease_bytes, kv_leases_active,
                    kv_role, moe_host_layers, moe_cache_slots, moe_cache_bytes, moe_host_bytes, moe_cpu_steps,
                    moe_copy_steps, moe_bytes_copied, moe_cache_hits, moe_cache_misses, moe_tokens,
                    moe_prefetch_experts, moe_prefetch_used, moe_predicted_wanted, moe_predicted_right,
                    images_encoded, image_cache_hits, image_tokens, image_encode_seconds }
        llm_embed_params { struct_size, pooling, normalize, dimensions, truncate, tokenize_flags, priority,
                           reserved0 }
        llm_model_info { struct_size, n_vocab, n_ctx_train, n_ctx, n_embd, n_layer, n_head, n_head_kv, bos, eos,
                         n_params, arch, name }
    }
}

fn rust_constants() -> Vec<(String, u64)> {
    let mut v = constants![
        LLM_VERSION_MAJOR, LLM_VERSION_MINOR, LLM_VERSION_PATCH, LLM_VERSION_NUMBER, LLM_MAX_DEVICES,
        LLM_OK, LLM_ERR_INVALID_ARGUMENT, LLM_ERR_NULL_ARGUMENT, LLM_ERR_STRUCT_SIZE, LLM_ERR_IO,
        LLM_ERR_MODEL_FORMAT, LLM_ERR_UNSUPPORTED, LLM_ERR_OUT_OF_MEMORY, LLM_ERR_BUSY, LLM_ERR_NOT_FOUND,
        LLM_ERR_CONTEXT_OVERFLOW, LLM_ERR_INVALID_UTF8, LLM_ERR_BUFFER_TOO_SMALL, LLM_ERR_BACKEND,
        LLM_ERR_SHUTDOWN, LLM_ERR_INTERNAL,
        LLM_BACKEND_AUTO, LLM_BACKEND_CPU, LLM_BACKEND_CUDA, LLM_GPU_LAYERS_ALL, LLM_GPU_LAYERS_AUTO,
        LLM_SPEC_AUTO, LLM_SPEC_OFF, LLM_SPEC_NGRAM, LLM_SPEC_DRAFT,
        LLM_PREEMPT_RECOMPUTE, LLM_PREEMPT_SWAP,
        LLM_KV_AUTO, LLM_KV_F32, LLM_KV_F16, LLM_KV_Q8_0, LLM_KV_Q4_0, LLM_KV_FP8_E4M3,
        LLM_KV_ROLE_NONE, LLM_KV_ROLE_PRODUCER, LLM_KV_ROLE_CONSUMER, LLM_KV_ROLE_BOTH,
        LLM_EVENT_TOKEN, LLM_EVENT_FINAL,
        LLM_FINISH_NONE, LLM_FINISH_STOP, LLM_FINISH_LENGTH, LLM_FINISH_CANCELLED, LLM_FINISH_ERROR,
        LLM_TOKENIZE_ADD_SPECIAL, LLM_TOKENIZE_PARSE_SPECIAL,
        LLM_DETOKENIZE_RENDER_SPECIAL, LLM_DETOKENIZE_STRIP_LEADING_SPACE,
        LLM_CONSTRAINT_NONE, LLM_CONSTRAINT_JSON_SCHEMA, LLM_CONSTRAINT_JSON_OBJECT, LLM_CONSTRAINT_REGEX,
        LLM_CONSTRAINT_CHOICE, LLM_CONSTRAINT_GRAMMAR, LLM_WHITESPACE_BOUNDED, LLM_WHITESPACE_FREE,
        LLM_TOOL_FORMAT_AUTO, LLM_TOOL_FORMAT_GENERIC, LLM_TOOL_FORMAT_HERMES, LLM_TOOL_FORMAT_LLAMA3,
        LLM_TOOL_FORMAT_MISTRAL,
        LLM_TASK_GENERATE, LLM_TASK_EMBED,
        LLM_POOLING_MODEL, LLM_POOLING_NONE, LLM_POOLING_MEAN, LLM_POOLING_CLS, LLM_POOLING_LAST, LLM_POOLING_RANK,
        LLM_REASONING_NONE, LLM_REASONING_DEEPSEEK, LLM_REASONING_HARMONY, LLM_REASONING_AUTO,
        LLM_PART_CONTENT, LLM_PART_REASONING,
        LLM_CONTENT_TEXT, LLM_CONTENT_IMAGE, LLM_CONTENT_IMAGE_RGB,
    ];
    v.push(("LLM_SEED_RANDOM".into(), sys::LLM_SEED_RANDOM));
    v
}

// ------------------------------------------------------------ header parsing

fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            i += 2 + src[i + 2..].find("*/").expect("unterminated comment") + 2;
            out.push(' ');
        } else if b[i..].starts_with(b"//") {
            i += src[i..].find('\n').unwrap_or(src.len() - i);
        } else {
            let c = src[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn last_ident(decl: &str) -> String {
    let decl = decl.split('[').next().unwrap().trim_end();
    let start = decl.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |p| p + 1);
    decl[start..].to_string()
}

struct Header {
    structs: Vec<(String, Vec<String>)>,
    constants: Vec<String>,
}

fn parse_header(src: &str) -> Header {
    let src = strip_comments(src);
    let mut structs = Vec::new();
    let mut rest = src.as_str();
    while let Some(p) = rest.find("typedef struct ") {
        rest = &rest[p + "typedef struct ".len()..];
        let name = rest.split(|c: char| c.is_whitespace() || c == '{' || c == ';').next().unwrap().to_string();
        let (Some(open), Some(semi)) = (rest.find('{'), rest.find(';')) else { continue };
        if semi < open {
            continue; // an opaque typedef (llm_ctx)
        }
        let close = open + rest[open..].find('}').unwrap();
        let fields =
            rest[open + 1..close].split(';').map(str::trim).filter(|d| !d.is_empty()).map(last_ident).collect();
        structs.push((name, fields));
        rest = &rest[close..];
    }
    let mut constants = Vec::new();
    let mut rest = src.as_str();
    while let Some(p) = rest.find("enum") {
        rest = &rest[p + 4..];
        // `enum {` or `typedef enum name {` (llm_constraint_kind).
        let after = rest.trim_start();
        let tag_end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
        if !after.starts_with('{') && !(tag_end > 0 && after[tag_end..].trim_start().starts_with('{')) {
            continue;
        }
        let open = rest.find('{').unwrap();
        let close = rest.find('}').unwrap();
        for item in rest[open + 1..close].split(',') {
            let name = item.split('=').next().unwrap().trim();
            if !name.is_empty() {
                constants.push(name.to_string());
            }
        }
        rest = &rest[close..];
    }
    for line in src.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("#define") {
            continue;
        }
        let Some(name) = words.next() else { continue };
        let has_value = words.next().is_some();
        if name.starts_with("LLM_") && !name.contains('(') && has_value && name != "LLM_API" {
            constants.push(name.to_string());
        }
    }
    Header { structs, constants }
}

// ------------------------------------------------------------------ C probe

fn include_dir() -> PathBuf {
    match std::env::var("LLMRT_INCLUDE_DIR") {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include"),
    }
}

/// Runs the probe; returns its lines: `S name size`, `F struct field offset
/// size`, `C name value`.
fn run_probe(h: &Header) -> Vec<String> {
    let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n#include \"llm.h\"\nint main(void) {\n");
    for (s, fields) in &h.structs {
        c += &format!("  printf(\"S {s} %zu\\n\", sizeof({s}));\n");
        for f in fields {
            c += &format!(
                "  printf(\"F {s} {f} %zu %zu\\n\", offsetof({s}, {f}), sizeof((({s}*)0)->{f}));\n"
            );
        }
    }
    for k in &h.constants {
        c += &format!("  printf(\"C {k} %llu\\n\", (unsigned long long)({k}));\n");
    }
    c += "  return 0;\n}\n";
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("llm_abi_probe.c");
    let exe = dir.join("llm_abi_probe");
    std::fs::write(&src, c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .arg("-std=c99")
        .arg("-I")
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(st.success(), "the ABI probe did not compile");
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect()
}

#[test]
fn sys_mirrors_llm_h() {
    let src = std::fs::read_to_string(include_dir().join("llm.h")).expect("llm.h");
    let h = parse_header(&src);
    assert!(h.structs.len() >= 7, "parsed only {} structs from llm.h", h.structs.len());

    let mut c_sizes = BTreeMap::new();
    let mut c_fields: BTreeMap<String, Vec<(String, usize, usize)>> = BTreeMap::new();
    let mut c_consts = BTreeMap::new();
    for line in run_probe(&h) {
        let w: Vec<&str> = line.split(' ').collect();
        match w[0] {
            "S" => {
                c_sizes.insert(w[1].to_string(), w[2].parse::<usize>().unwrap());
            }
            "F" => c_fields.entry(w[1].to_string()).or_default().push((
                w[2].to_string(),
                w[3].parse().unwrap(),
                w[4].parse().unwrap(),
            )),
            "C" => {
                c_consts.insert(w[1].to_string(), w[2].parse::<u64>().unwrap());
            }
            _ => panic!("probe: {line}"),
        }
    }

    let mut problems = Vec::new();
    let rust = rust_layout();
    for (name, size, fields) in &rust {
        match c_sizes.get(name) {
            None => problems.push(format!("{name}: in the Rust mirror, not in llm.h")),
            Some(cs) if cs != size => problems.push(format!("{name}: size {size} in Rust, {cs} in C")),
            _ => {}
        }
        let cf = c_fields.get(name).cloned().unwrap_or_default();
        if &cf != fields {
            problems.push(format!("{name}: fields differ\n  C:    {cf:?}\n  Rust: {fields:?}"));
        }
    }
    // A struct or constant that is new in llm.h and not yet mirrored is not an
    // ABI mismatch (the binding just does not use it yet): reported, and an
    // error only with LLMRT_STRICT_MIRROR=1. A changed struct always fails.
    let strict = std::env::var("LLMRT_STRICT_MIRROR").map_or(false, |v| v == "1");
    let mut not_mirrored = Vec::new();
    for name in c_sizes.keys() {
        if !rust.iter().any(|(n, _, _)| n == name) {
            not_mirrored.push(format!("struct {name}: in llm.h, not in the Rust mirror"));
        }
    }
    let rc: BTreeMap<String, u64> = rust_constants().into_iter().collect();
    for (k, v) in &c_consts {
        match rc.get(k) {
            None => not_mirrored.push(format!("constant {k}: in llm.h, not in sys")),
            Some(r) if r != v => problems.push(format!("constant {k}: {r} in Rust, {v} in C")),
            _ => {}
        }
    }
    for k in rc.keys() {
        if !c_consts.contains_key(k) {
            problems.push(format!("constant {k}: in sys, not in llm.h"));
        }
    }
    for n in &not_mirrored {
        eprintln!("note: {n}");
    }
    if strict {
        problems.extend(not_mirrored);
    }
    assert!(problems.is_empty(), "sys.rs does not mirror llm.h:\n{}", problems.join("\n"));
}

/// The check itself: a field added to a struct of the header must be caught
/// even where it fits into padding and leaves the size unchanged.
#[test]
fn parser_sees_an_added_field() {
    let src = std::fs::read_to_string(include_dir().join("llm.h")).expect("llm.h");
    let patched = src.replacen("  uint64_t seed;", "  int32_t new_field;\n  uint64_t seed;", 1);
    assert_ne!(patched, src, "llm_sampling_params.seed not found in llm.h");
    let h = parse_header(&patched);
    let (_, fields) = h.structs.iter().find(|(n, _)| n == "llm_sampling_params").unwrap();
    let rust = rust_layout();
    let (_, _, rf) = rust.iter().find(|(n, _, _)| n == "llm_sampling_params").unwrap();
    let rust_names: Vec<&str> = rf.iter().map(|(n, _, _)| n.as_str()).collect();
    assert!(fields.iter().any(|f| f == "new_field"));
    assert_ne!(fields.iter().map(String::as_str).collect::<Vec<_>>(), rust_names);
}

/// Images in the prompt (issue 36): llm_content_part_init fills the mirror
/// (writing no byte past it), and a request with an image part on a context
/// without a projector file is refused, naming mmproj_path.
#[test]
fn content_parts_through_sys() {
    unsafe {
        let mut buf = [0x5au8; 64];
        assert_eq!(sys::llm_content_part_init(buf.as_mut_ptr().cast()), sys::LLM_OK);
        let part: sys::llm_content_part = std::ptr::read_unaligned(buf.as_ptr().cast());
        assert_eq!(part.struct_size as usize, size_of::<sys::llm_content_part>());
        assert_eq!(part.kind, sys::LLM_CONTENT_TEXT);
        assert!(part.text.is_null() && part.data.is_null() && part.n_data == 0);
        assert_eq!(buf[size_of::<sys::llm_content_part>()], 0x5a);

        let p = sys::init_struct(sys::llm_ctx_params_init);
        assert!(p.mmproj_path.is_null());
        let mut ctx = std::ptr::null_mut();
        assert_eq!(sys::llm_ctx_create(&p, &mut ctx), sys::LLM_OK);
        let pixels = [0u8; 2 * 2 * 3];
        let mut img: sys::llm_content_part = std::ptr::read_unaligned(buf.as_ptr().cast());
        img.kind = sys::LLM_CONTENT_IMAGE_RGB;
        img.data = pixels.as_ptr().cast();
        img.n_data = pixels.len();
        img.width = 2;
        img.height = 2;
        let mut r = sys::init_struct(sys::llm_request_init);
        r.parts = &img;
        r.n_parts = 1;
        let mut id = 0u64;
        assert_eq!(sys::llm_submit(ctx, &r, &mut id), sys::LLM_ERR_INVALID_ARGUMENT);
        let msg = std::ffi::CStr::from_ptr(sys::llm_last_error()).to_string_lossy().into_owned();
        assert!(msg.contains("mmproj_path"), "{msg}");
        sys::llm_ctx_destroy(ctx);
    }
}
