//! Streams a story from the model built into the library:
//! `cargo run --offline --example stream -- "Once upon a time"`
use llmrt::{Context, Event, Request};
use std::io::Write;

fn main() -> Result<(), llmrt::Error> {
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "Once upon a time".to_string());
    let ctx = Context::builtin()?;
    let req = Request::new(prompt.clone()).max_tokens(200).temperature(0.8).seed(42);
    print!("{prompt}");
    for ev in ctx.submit(req)? {
        let ev = ev?;
        print!("{}", ev.text());
        std::io::stdout().flush().ok();
        if let Event::Final { finish, metrics, .. } = ev {
            eprintln!("\n[{finish:?}: {} tokens, {:.1} ms/token]", metrics.generated_tokens, metrics.tpot_ms);
        }
    }
    println!();
    Ok(())
}
