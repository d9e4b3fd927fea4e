//! Pictures in the prompt through the safe API (issue 36): on llm-synth's
//! tiny-gemma3 with its projector, a PNG and the same pixels given raw
//! (Pillow's decode in tests/data/images) give the same greedy tokens and
//! are one picture to the image cache (`llm_stats` through `sys`: one
//! encoding, one hit, 16 image positions each); a raw picture of the wrong
//! size is refused. Skips without llm-synth (`LLMRT_SYNTH`, else the
//! repository's build/bin).

use llmrt::{sys, ContentPart, Context, ContextParams, Request, Status};
use std::path::PathBuf;

fn synth() -> Option<PathBuf> {
    let p = std::env::var("LLMRT_SYNTH")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/bin/llm-synth"));
    p.is_file().then_some(p)
}

fn stats(ctx: &Context) -> sys::llm_stats {
    unsafe {
        let mut s: sys::llm_stats = std::mem::zeroed();
        s.struct_size = std::mem::size_of::<sys::llm_stats>() as u32;
        assert_eq!(sys::llm_get_stats(ctx.as_raw(), &mut s), sys::LLM_OK);
        s
    }
}

#[test]
fn image_parts_through_the_binding() {
    let Some(synth) = synth() else {
        eprintln!("llm-synth not found (LLMRT_SYNTH): skipping");
        return;
    };
    let dir = std::env::temp_dir().join(format!("llmrt_rust_images_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (model, mmproj) = (dir.join("g3.gguf"), dir.join("mmproj.gguf"));
    let ok = std::process::Command::new(&synth)
        .args(["--shape", "tiny-gemma3", "--type", "f32", "--seed", "7", "--out"])
        .arg(&model)
        .arg("--mmproj")
        .arg(&mmproj)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "llm-synth failed");
    let ctx = Context::new(ContextParams::default().model_path(&model).mmproj_path(&mmproj).n_ctx(512).n_threads(2))
        .unwrap();
    let images = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/images");
    let png = std::fs::read(images.join("rgb.png")).unwrap();
    let rgb = std::fs::read(images.join("rgb.png.rgb")).unwrap();
    let ask = |part: ContentPart| {
        ctx.generate(Request::from_parts(vec![ContentPart::Text("Describe: ".into()), part]).max_tokens(6).ignore_eos(true).greedy())
    };
    let a = match ask(ContentPart::Image(png)) {
        Err(e) if e.status() == Status::Unsupported => {
            eprintln!("built without the image codecs: skipping");
            return;
        }
        r => r.unwrap(),
    };
    let s1 = stats(&ctx);
    assert_eq!((s1.images_encoded, s1.image_cache_hits, s1.image_tokens), (1, 0, 16));
    assert!(s1.image_encode_seconds > 0.0);
    let b = ask(ContentPart::Rgb { pixels: rgb.clone(), width: 17, height: 11 }).unwrap();
    assert_eq!(a.tokens().len(), 6);
    assert_eq!(a.tokens(), b.tokens(), "the PNG and its pixels continue alike");
    let s2 = stats(&ctx);
    assert_eq!((s2.images_encoded, s2.image_cache_hits, s2.image_tokens), (1, 1, 32), "one picture, encoded once");
    let text = ctx.generate(Request::from_parts(vec![ContentPart::Text("Describe: ".into())]).max_tokens(1)).unwrap();
    assert!(a.sequences[0].metrics.prompt_tokens >= text.sequences[0].metrics.prompt_tokens + 16);
    let short = ask(ContentPart::Rgb { pixels: rgb[..rgb.len() - 1].to_vec(), width: 17, height: 11 });
    assert_eq!(short.unwrap_err().status(), Status::InvalidArgument);
    drop(ctx);
    let _ = std::fs::remove_dir_all(&dir);
}
