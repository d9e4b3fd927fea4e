//! The safe API against the golden greedy outputs, the raw C API,
//! cancellation, concurrency and errors. Uses the model built into the
//! library.

use llmrt::{sys, Backend, Context, ContextParams, Event, FinishReason, Request, Status};
use std::sync::Arc;

struct Case {
    prompt: String,
    prompt_ids: Vec<i32>,
    generated: Vec<i32>,
}

fn golden() -> Vec<Case> {
    let path = std::env::var("LLMRT_GOLDEN").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/golden-greedy.tsv").to_string()
    });
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let ids = |s: &str| s.split_whitespace().map(|t| t.parse().unwrap()).collect::<Vec<i32>>();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.splitn(3, '\t').collect();
            Case { prompt_ids: ids(f[0]), generated: ids(f[1]), prompt: f.get(2).unwrap_or(&"").to_string() }
        })
        .collect()
}

fn greedy_request(c: &Case) -> Request {
    let r = if c.prompt.is_empty() { Request::from_tokens(c.prompt_ids.clone()) } else { Request::new(c.prompt.clone()) };
    r.max_tokens(c.generated.len() as i32).greedy()
}

/// Greedy generation through the C API alone (own context, llm_poll into an
/// array), as the reference for the safe layer.
fn c_api_greedy(prompt: &str, max_tokens: i32) -> Vec<i32> {
    unsafe {
        let mut p = sys::init_struct(sys::llm_ctx_params_init);
        p.model_path = std::ptr::null();
        let mut ctx = std::ptr::null_mut();
        assert_eq!(sys::llm_ctx_create(&p, &mut ctx), sys::LLM_OK);
        let mut sp = sys::init_struct(sys::llm_sampling_params_init);
        sp.temperature = 0.0;
        let mut r = sys::init_struct(sys::llm_request_init);
        let cprompt = std::ffi::CString::new(prompt).unwrap();
        r.prompt = cprompt.as_ptr();
        r.max_tokens = max_tokens;
        r.sampling = &sp;
        let mut id = 0u64;
        assert_eq!(sys::llm_submit(ctx, &r, &mut id), sys::LLM_OK);
        let mut out = Vec::new();
        let mut evs: Vec<sys::llm_event> = vec![std::mem::zeroed(); 16];
        'outer: loop {
            evs[0].struct_size = std::mem::size_of::<sys::llm_event>() as u32;
            let mut n = 0u32;
            assert_eq!(sys::llm_poll(ctx, evs.as_mut_ptr(), 16, &mut n, 1000), sys::LLM_OK);
            for e in &evs[..n as usize] {
                assert_eq!(e.request_id, id);
                if e.type_ == sys::LLM_EVENT_FINAL {
                    break 'outer;
                }
                out.push(e.token);
            }
        }
        sys::llm_ctx_destroy(ctx);
        out
    }
}

#[test]
fn greedy_matches_golden_and_c_api() {
    let ctx = Context::builtin().unwrap();
    let cases = golden();
    assert!(cases.len() >= 5);
    for c in &cases {
        let out = ctx.generate(greedy_request(c)).unwrap();
        assert_eq!(out.tokens(), &c.generated[..], "prompt {:?}", c.prompt);
        assert_eq!(out.finish(), FinishReason::Length);
    }
    let c = &cases[0];
    assert_eq!(c_api_greedy(&c.prompt, c.generated.len() as i32), c.generated);
}

#[test]
fn iterator_and_closure_stream_the_same_text() {
    let ctx = Context::builtin().unwrap();
    let c = &golden()[1];
    let mut it_text = String::new();
    let mut finals = 0;
    for ev in ctx.submit(greedy_request(c)).unwrap() {
        let ev = ev.unwrap();
        it_text.push_str(ev.text());
        finals += ev.is_final() as i32;
    }
    assert_eq!(finals, 1);
    let mut cb_text = String::new();
    let out = ctx.submit(greedy_request(c)).unwrap().for_each_event(|ev| {
        cb_text.push_str(ev.text());
        true
    });
    let out = out.unwrap();
    assert_eq!(it_text, cb_text);
    assert_eq!(out.text(), cb_text);
    assert_eq!(out.text(), ctx.detokenize(&c.generated).unwrap().as_str());
}

#[test]
fn one_context_shared_by_8_threads() {
    let ctx = Arc::new(Context::builtin().unwrap());
    let cases = Arc::new(golden());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let ctx = Arc::clone(&ctx);
            let cases = Arc::clone(&cases);
            std::thread::spawn(move || {
                for k in 0..2 {
                    let c = &cases[(t + k) % cases.len()];
                    let out = ctx.generate(greedy_request(c)).unwrap();
                    assert_eq!(out.tokens(), &c.generated[..], "thread {t} prompt {:?}", c.prompt);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn cancel_from_another_thread_and_from_the_closure() {
    let ctx = Context::builtin().unwrap();
    let long = || Request::new("Once upon a time").max_tokens(400).ignore_eos(true).greedy();

    let h = ctx.submit(long()).unwrap();
    let canceller = h.canceller();
    let mut tokens = 0;
    let mut finish = None;
    for ev in h {
        match ev.unwrap() {
            Event::Token { .. } => {
                tokens += 1;
                if tokens == 3 {
                    let c = canceller.clone();
                    std::thread::spawn(move || c.cancel().unwrap()).join().unwrap();
                }
            }
            Event::Final { finish: f, .. } => finish = Some(f),
        }
    }
    assert_eq!(finish, Some(FinishReason::Cancelled));
    assert!(tokens < 400, "{tokens} tokens after cancel");

    let mut seen = 0;
    let out = ctx.submit(long()).unwrap().for_each_event(|_| {
        seen += 1;
        seen < 5
    });
    let out = out.unwrap();
    assert_eq!(out.finish(), FinishReason::Cancelled);
    assert!(out.tokens().len() < 400);

    // Dropping an unfinished handle cancels it; the context keeps working.
    drop(ctx.submit(long()).unwrap());
    let c = &golden()[0];
    assert_eq!(ctx.generate(greedy_request(c)).unwrap().tokens(), &c.generated[..]);
}

#[test]
fn missing_model_file_is_an_io_error_with_message() {
    let err = match Context::new(ContextParams::default().model_path("/nonexistent/model.gguf")) {
        Ok(_) => panic!("a missing model file loaded"),
        Err(e) => e,
    };
    assert_eq!(err.status(), Status::Io);
    assert!(err.message().contains("/nonexistent/model.gguf"), "message: {}", err.message());
    assert!(err.to_string().starts_with("LLM_ERR_IO"));
}

#[test]
fn bad_requests_are_rejected() {
    let ctx = Context::builtin().unwrap();
    let err = ctx.submit(Request::new("hi").max_tokens(0)).err().unwrap();
    assert_eq!(err.status(), Status::InvalidArgument);
    let err = ctx.submit(Request::new("a\0b")).err().unwrap();
    assert_eq!(err.status(), Status::InvalidArgument);
}

#[test]
fn parallel_samples_and_model_info() {
    let ctx = Context::builtin().unwrap();
    let out = ctx.generate(Request::new("The sun was").max_tokens(20).n(3).temperature(1.0).seed(7)).unwrap();
    assert_eq!(out.sequences.len(), 3);
    for s in &out.sequences {
        assert!(!s.tokens.is_empty());
        assert_eq!(s.metrics.generated_tokens as usize, s.tokens.len());
    }
    let info = ctx.model_info().unwrap();
    assert_eq!(info.arch, "llama");
    assert_eq!(ctx.tokenize("Once upon a time", true).unwrap(), golden()[0].prompt_ids);
}

#[test]
fn dropping_the_context_ends_live_handles() {
    let ctx = Context::builtin().unwrap();
    let mut h = ctx.submit(Request::new("Once upon a time").max_tokens(400).ignore_eos(true)).unwrap();
    let first = h.next().unwrap();
    assert!(first.is_ok());
    drop(ctx);
    let rest: Vec<_> = h.collect();
    // Whatever was already routed may still arrive; the stream then ends
    // with a Shutdown error instead of hanging.
    let last = rest.last().unwrap();
    assert!(matches!(last, Err(e) if e.status() == Status::Shutdown) || matches!(last, Ok(Event::Final { .. })));
}

#[test]
fn logit_bias_min_tokens_stop_tokens_and_top_logprobs() {
    let ctx = Context::builtin().unwrap();
    let eos = ctx.model_info().unwrap().eos.unwrap();
    let plain = ctx.generate(Request::new("Once upon a time").max_tokens(10).greedy()).unwrap();
    let plain = &plain.sequences[0].tokens;
    assert_eq!(plain.len(), 10);

    // A banned token never appears.
    let banned =
        ctx.generate(Request::new("Once upon a time").max_tokens(10).greedy().logit_bias(plain[0], f32::NEG_INFINITY));
    assert!(!banned.unwrap().sequences[0].tokens.contains(&plain[0]));

    // EOS pushed to the top, held back by min_tokens.
    let out = ctx
        .generate(Request::new("Once upon a time").max_tokens(10).greedy().logit_bias(eos, 100.0).min_tokens(3))
        .unwrap();
    assert_eq!(out.sequences[0].tokens.len(), 4);
    assert_eq!(out.sequences[0].tokens[3], eos);
    assert_eq!(out.sequences[0].finish, FinishReason::Stop);

    // A stop token id ends the sequence where it first appears.
    let out = ctx.generate(Request::new("Once upon a time").max_tokens(10).greedy().stop_token(plain[4])).unwrap();
    assert_eq!(out.sequences[0].tokens.last(), Some(&plain[4]));
    assert_eq!(out.sequences[0].finish, FinishReason::Stop);

    // top_logprobs: k alternatives per token, the greedy one first.
    let h = ctx.submit(Request::new("Once upon a time").max_tokens(5).greedy().top_logprobs(4)).unwrap();
    let mut seen = 0;
    for ev in h {
        if let Event::Token { token, logprob, top_logprobs, .. } = ev.unwrap() {
            assert_eq!(top_logprobs.len(), 4);
            assert_eq!(top_logprobs[0], (token, logprob));
            assert!(top_logprobs.windows(2).all(|w| w[0].1 >= w[1].1));
            seen += 1;
        }
    }
    assert_eq!(seen, 5);

    // Bad values are rejected at submit with a status.
    let err = ctx.submit(Request::new("hi").logit_bias(1, f32::NAN)).err().unwrap();
    assert_eq!(err.status(), Status::InvalidArgument);
    let err = ctx.submit(Request::new("hi").top_logprobs(21)).err().unwrap();
    assert_eq!(err.status(), Status::InvalidArgument);
}

#[test]
fn constrained_requests_and_tool_calls() {
    use llmrt::{parse_tool_calls, Constraint, ToolFormat};
    let ctx = Context::builtin().unwrap();
    // A choice and a regex: the output is one of the choices / matches.
    let choices = vec!["yes".to_string(), "no".to_string()];
    let r = Request::new("Once upon a time").max_tokens(8).greedy().constraint(Constraint::Choice(choices.clone()));
    let out = ctx.generate(r).unwrap();
    assert!(choices.contains(&out.sequences[0].text), "{:?}", out.sequences[0].text);
    let r = Request::new("Once upon a time").max_tokens(8).temperature(1.0).seed(3)
        .constraint(Constraint::Regex("[0-9]{3}".into()));
    let text = ctx.generate(r).unwrap().sequences[0].text.clone();
    assert!(text.len() == 3 && text.bytes().all(|b| b.is_ascii_digit()), "{text:?}");
    let err = ctx.submit(Request::new("hi").constraint(Constraint::JsonSchema("{\"type\": 5}".into()))).err().unwrap();
    assert_eq!(err.status(), Status::InvalidArgument);
    let err = ctx.submit(Request::new("hi").constraint(Constraint::Regex("a\0b".into()))).err().unwrap();
    assert_eq!(err.status(), Status::InvalidArgument);

    let json =
        parse_tool_calls(ToolFormat::Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>")
            .unwrap();
    assert_eq!(json, r#"{"content":"","tool_calls":[{"name":"f","arguments":{"x":1}}]}"#);
    let json = parse_tool_calls(ToolFormat::Auto, "[TOOL_CALLS]add[ARGS]{\"a\": 2}").unwrap();
    assert_eq!(json, r#"{"content":"","tool_calls":[{"name":"add","arguments":{"a":2}}]}"#);
    // Content that grows when escaped takes the BUFFER_TOO_SMALL retry.
    let lines = "\n".repeat(1000);
    let json = parse_tool_calls(ToolFormat::Generic, &lines).unwrap();
    assert_eq!(json, format!(r#"{{"content":"{}","tool_calls":[]}}"#, "\\n".repeat(1000)));
    let err = parse_tool_calls(ToolFormat::Hermes, "<tool_call>{\"name\": ").unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("truncated"), "{}", err.message());
    assert_eq!(ctx.tool_format().unwrap(), ToolFormat::Generic); // stories260K has no template
}

#[test]
fn kv_state_saved_to_a_file_is_reused_by_another_context() {
    let prompt: Vec<i32> = std::iter::once(1).chain((1..40).map(|i| (7 * i + 11) % 250 + 3)).collect();
    let a = Context::builtin().unwrap();
    let out = a.generate(Request::from_tokens(prompt.clone()).max_tokens(8).greedy().ignore_eos(true)).unwrap();
    let mut conv = prompt.clone();
    conv.extend_from_slice(out.tokens());
    let dir = std::env::temp_dir();
    let path = dir.join(format!("llmrt-rust-kv-{}.llmkv", std::process::id()));
    let saved = a.export_kv_file(&conv, 0, &path).unwrap();
    assert_eq!(saved, 32, "whole 16-token blocks of the 47 computed tokens");

    let b = Context::builtin().unwrap();
    assert_eq!(b.import_kv_file(0, &path).unwrap(), 32);
    let again = b.generate(Request::from_tokens(conv.clone()).max_tokens(4).greedy().ignore_eos(true)).unwrap();
    assert_eq!(again.sequences[0].metrics.cached_prompt_tokens, 32, "the imported prefix was not reused");
    let cold = a.generate(Request::from_tokens(conv.clone()).max_tokens(4).greedy().ignore_eos(true)).unwrap();
    assert_eq!(again.tokens(), cold.tokens());

    // A missing file is IO, a damaged one KV_CORRUPT; the context goes on.
    let err = b.import_kv_file(0, dir.join("llmrt-no-such-file.llmkv")).err().unwrap();
    assert_eq!(err.status(), Status::Io);
    std::fs::write(&path, b"not a KV stream at all").unwrap();
    let err = b.import_kv_file(0, &path).err().unwrap();
    assert_eq!(err.status(), Status::KvCorrupt, "{}", err.message());
    std::fs::remove_file(&path).ok();
    assert!(!b.generate(Request::new("Once").max_tokens(2)).unwrap().tokens().is_empty());
}

#[test]
fn kv_types_apart() {
    // K Q8_0 and V F16 (llm_ctx_params.kv_type_v) on the CPU backend: the
    // context runs; a V type that is no LLM_KV_* value reaches the library
    // and is refused.
    let params = ContextParams::default().backend(Backend::Cpu).n_ctx(128);
    let ctx = Context::new(params.clone().kv_types(sys::LLM_KV_Q8_0, sys::LLM_KV_F16)).unwrap();
    let out = ctx.generate(Request::new("Once upon a time").max_tokens(4).temperature(0.0)).unwrap();
    assert!(!out.tokens().is_empty());
    drop(ctx);
    let err = match Context::new(params.kv_types(sys::LLM_KV_AUTO, 99)) {
        Ok(_) => panic!("kv_type_v 99 accepted"),
        Err(e) => e,
    };
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("kv_type_v"), "message: {}", err.message());
    // FP8 E4M3 is a CUDA (sm_89+) pool: the CPU refuses it by name.
    let err = match Context::new(ContextParams::default().backend(Backend::Cpu).kv_types(sys::LLM_KV_FP8_E4M3, 0)) {
        Ok(_) => panic!("an FP8 E4M3 CPU pool accepted"),
        Err(e) => e,
    };
    assert_eq!(err.status(), Status::Unsupported);
    assert!(err.message().contains("fp8_e4m3"), "message: {}", err.message());
}
