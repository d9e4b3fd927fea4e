//! Embeddings through the safe API on llm-synth's tiny BERT (skipped, with a
//! note, without the tool: $LLMRT_SYNTH, else ../../build/bin/llm-synth):
//! unit vectors of 64, a batch equal to single calls bitwise, Matryoshka
//! truncation, raw vectors, the rerank layout, and clear errors for bad input.

use llmrt::{Backend, Context, ContextParams, EmbedOptions, Pooling, Status};
use std::path::PathBuf;
use std::process::Command;

fn tiny_bert() -> Option<(Context, PathBuf)> {
    let synth = std::env::var("LLMRT_SYNTH")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/bin/llm-synth"));
    if !synth.exists() {
        eprintln!("note: no llm-synth at {}: skipped", synth.display());
        return None;
    }
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("tiny-bert-{}.gguf", std::process::id()));
    let st = Command::new(&synth)
        .args(["--shape", "tiny-bert", "--type", "f32", "--out"])
        .arg(&path)
        .output()
        .expect("llm-synth runs");
    assert!(st.status.success(), "llm-synth: {}", String::from_utf8_lossy(&st.stderr));
    let ctx = Context::new(ContextParams::default().model_path(&path).backend(Backend::Cpu).n_threads(2)).unwrap();
    Some((ctx, path))
}

fn norm2(v: &[f32]) -> f64 {
    v.iter().map(|&x| f64::from(x) * f64::from(x)).sum()
}

#[test]
fn embeddings_of_a_tiny_bert() {
    let Some((ctx, path)) = tiny_bert() else { return };
    let inputs = vec![vec![2, 17, 40, 3], vec![2, 200, 201, 202, 203, 3], vec![2, 3]];
    let vecs = ctx.embed(&inputs, EmbedOptions::default()).unwrap();
    assert_eq!(vecs.len(), 3);
    for (i, v) in vecs.iter().enumerate() {
        assert_eq!(v.len(), 64);
        assert!((norm2(v) - 1.0).abs() < 1e-5, "vector {i}: norm² {}", norm2(v));
        let one = ctx.embed(&inputs[i..i + 1], EmbedOptions::default()).unwrap();
        assert_eq!(one[0], *v, "vector {i} differs alone");
    }
    // raw: not unit length, the same direction
    let raw = ctx.embed(&inputs[..1], EmbedOptions { raw: true, ..Default::default() }).unwrap();
    let n = norm2(&raw[0]).sqrt();
    assert!((n - 1.0).abs() > 1e-3);
    for (a, b) in raw[0].iter().zip(&vecs[0]) {
        assert!((f64::from(*a) / n - f64::from(*b)).abs() < 1e-5);
    }
    // Matryoshka: 16 values, renormalised
    let cut = ctx.embed(&inputs[..1], EmbedOptions { dimensions: 16, pooling: Pooling::Cls, ..Default::default() }).unwrap();
    assert_eq!(cut[0].len(), 16);
    assert!((norm2(&cut[0]) - 1.0).abs() < 1e-5);
    // texts through the model's WordPiece
    let t = ctx.embed_texts(&["w57 w123", "hello"], EmbedOptions::default()).unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].len(), 64);
    let ids = ctx.tokenize("w57 w123", true).unwrap();
    assert_eq!(ctx.embed(&[ids], EmbedOptions::default()).unwrap()[0], t[0]);
    // a cross-encoder's layout: [CLS] q [SEP] [SEP] d [SEP]
    let pair = ctx.rerank_tokenize("w57", "w99 w100").unwrap();
    let q = ctx.tokenize("w57", false).unwrap();
    let d = ctx.tokenize("w99 w100", false).unwrap();
    let info = ctx.model_info().unwrap();
    let (bos, eos) = (info.bos.unwrap(), info.eos.unwrap());
    let mut want = vec![bos];
    want.extend(&q);
    want.extend([eos, eos]);
    want.extend(&d);
    want.push(eos);
    assert_eq!(pair, want);
    // bad input: clear statuses
    let e = ctx.embed(&[vec![]], EmbedOptions::default()).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "{e}");
    let e = ctx.embed(&inputs[..1], EmbedOptions { pooling: Pooling::Rank, ..Default::default() }).unwrap_err();
    assert_eq!(e.status(), Status::Unsupported, "{e}");
    let e = ctx.embed(&inputs[..1], EmbedOptions { dimensions: 65, ..Default::default() }).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "{e}");
    let e = ctx.embed(&[vec![5; 600]], EmbedOptions::default()).unwrap_err();
    assert_eq!(e.status(), Status::ContextOverflow, "{e}");
    assert_eq!(ctx.embed(&[vec![5; 600]], EmbedOptions { truncate: true, ..Default::default() }).unwrap()[0].len(), 64);
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_generative_model_refuses_embeddings() {
    let ctx = Context::builtin().unwrap();
    let e = ctx.embed(&[vec![1, 50, 60]], EmbedOptions::default()).unwrap_err();
    assert_eq!(e.status(), Status::Unsupported, "{e}");
    assert!(e.message().contains("does not make embeddings"), "{e}");
}
