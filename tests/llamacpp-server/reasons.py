"""Why each failing test of llama.cpp's server suite fails against
llm-server: one rule per reason, the first that matches names it.

A rule matches a failure by its file, its test id and its message (regular
expressions; None matches anything). Its kind is one of:
  model    the suite's model is on Hugging Face only (launcher exit 3), or a
           file the suite makes with llama.cpp's tools (a LoRA, a draft)
  feature  a feature llmrt does not have, named
  design   llmrt does it otherwise on purpose, named
  field    a llama.cpp-only field, format or header the test reads
  sampler  the expected text is what llama.cpp's sampler draws from the test
           model; llmrt's sampler draws other tokens from the same
           distribution (its RNG and chain differ), so regexes on the text fail
A failure no rule names is listed as unexplained: fix it or add its rule.
"""
import re

RULES = [
    # ---- models and files that are not on this machine
    (None, None, r"model not available|return code 3|huggingface\.co", "model",
     "the test's model is on Hugging Face only (no network here)"),
    (r"test_lora|test_speculative", None, r"FileNotFoundError", "model",
     "a file the suite downloads (a LoRA adapter, a draft model)"),
    (r"test_router", None, r"FileNotFoundError", "feature",
     "router mode: models loaded and unloaded on demand (llm-server serves one model)"),
    # ---- features llmrt does not have
    (r"test_router", None, None, "feature", "router mode: several models behind one server, loaded on demand"),
    (r"test_sleep", None, None, "feature", "--sleep-idle-seconds: unloading the model when idle"),
    (r"test_mcp_servers|test_proxy|test_tools_builtin", None, None, "feature",
     "MCP servers, built-in tools run by the server, the web UI's CORS proxy"),
    (r"test_security", r"cors_proxy", None, "feature", "the web UI's CORS proxy (/cors-proxy)"),
    (r"test_security", r"cors_origins", None, "feature",
     "router mode (the preset these tests start); --cors-origins itself is implemented and tested"),
    (r"test_lora", None, None, "feature", "LoRA adapters"),
    (r"test_speculative", None, None, "feature", "a draft model given to the server (-md); llmrt speculates with n-grams"),
    (r"test_vision_api", None, None, "feature", "images (multimodal projectors, --mmproj)"),
    (r"test_security", r"local_media_file", None, "feature", "images (multimodal projectors, --mmproj)"),
    (r"test_compat_anthropic", r"image|vision", None, "feature", "images (multimodal projectors, --mmproj)"),
    (r"test_infill", None, None, "feature", "/infill (fill-in-the-middle prompts)"),
    (r"test_template", r"reasoning", None, "feature", "--reasoning-format / --reasoning-budget (reasoning output apart)"),
    (r"test_compat_anthropic", r"thinking", None, "feature", "extended thinking (reasoning output apart)"),
    (r"test_ctx_shift", None, None, "feature", "--context-shift (dropping the oldest tokens when the context fills)"),
    (r"test_slot_save", None, r"80 == 84|n_saved|n_restored", "design",
     "slot files hold whole KV blocks of the prefix cache (16 tokens each), not llama.cpp's token counts"),
    (r"test_slot_save", r"erase", r"5 == 21", "design",
     "erase forgets the slot's conversation; its blocks stay in the shared prefix cache for any request"),
    (r"test_kv_keep_only_active", None, None, "feature", "--cache-idle-slots"),
    (r"test_compat_gcp", None, None, "feature", "Vertex AI's :predict endpoint"),
    (r"test_basic", r"test_no_ui", None, "feature", "the web UI"),
    (r"test_security", r"static_assets", None, "feature", "the web UI"),
    (r"test_basic", r"multiple_addresses", None, "feature", "several --host addresses"),
    (r"test_completion", r"backend_sampling", None, "feature", "--backend-sampling"),
    (r"test_stream", r"model_load|slashed_model", None, "feature", "router mode (models loaded during a stream)"),
    (r"test_chat_completion", r"token_count", None, "feature", "/chat/completions/count_tokens (llama.cpp's own)"),
    (r"test_chat_completion", r"return_progress", None, "feature", "return_progress (prompt progress chunks)"),
    (r"test_template", r"date_inside_prompt", r"return code 1", "feature",
     "a template that needs a Jinja feature llmrt's renderer lacks (named in the server's message)"),
    (r"test_tool_call", None, r"return code 1", "feature",
     "a template that needs a Jinja feature llmrt's renderer lacks (named in the server's message)"),
    # ---- on purpose
    (r"test_security", r"cors_options", None, "design",
     "cross-origin pages are refused by default (--cors-origins '*' allows them): a local server is not readable "
     "from any web site"),
    (r"test_metrics", r"disabled", None, "design", "/metrics is on by default"),
    (r"test_basic|test_chat_completion", r"server_props|server_slots|context_size_exceeded", r"n_ctx|/ 2|512",
     "design", "-c is the context every sequence shares, not split into slots"),
    (r"test_chat_completion", r"context_size_exceeded", None, "design",
     "a context overflow is OpenAI's invalid_request_error (code context_length_exceeded)"),
    (None, None, r"system_fingerprint|startswith\('b'\)|llmrt-0\.1\.0", "field",
     "system_fingerprint is llmrt's version, not a llama.cpp build number (b1234)"),
    (r"test_compat_anthropic", r"empty_messages", None, "design",
     "a Messages request without messages is refused (400), as Anthropic's API refuses it"),
    (r"test_chat_completion", r"cached_tokens", r"36 == 77", "design",
     "a model without a chat template (the suite's stories260K) gets llmrt's plain transcript, not ChatML, "
     "so the prompt's token count differs"),
    (r"test_compat_oai_responses", r"llama_telemetry", None, "field", "llama.cpp's own telemetry fields in the stream"),
    (r"test_chat_completion", r"invalid_chat_completion_req", None, "design",
     "two assistant turns in a row are accepted (the template decides)"),
    (r"test_chat_completion", r"continue_final_message_mutual_exclusion", None, "design",
     "continue_final_message beside add_generation_prompt is accepted"),
    # ---- llama.cpp-only fields
    (None, None, r"__verbose|adaptive_target|'prob' in|KeyError: 'logit_bias'|Process-Start-Time-Unix|timings",
     "field", "a llama.cpp-only response field or header (__verbose, generation_settings, probs, timings)"),
    (r"test_chat_completion", r"apply_chat_template", None, "field",
     "a template chosen by a llama.cpp name (command-r) llmrt does not know"),
    (r"test_template", r"add_generation_prompt", None, "field", "the Llama 3.3 template's rendering checked through "
     "__verbose"),
    (r"test_metrics", None, None, "field", "llama.cpp's metric names (llamacpp:*)"),
    # ---- sampled text
    (None, None, r"= match_regex\(|Expected .*, got|assert match_regex", "sampler",
     "the expected text is what llama.cpp's sampler draws"),
]

_COMPILED = [(re.compile(f) if f else None, re.compile(n) if n else None, re.compile(m) if m else None, kind, why)
             for f, n, m, kind, why in RULES]


def classify(file, name, message):
    """(kind, reason) of a failure, or ("unexplained", message)."""
    for f, n, m, kind, why in _COMPILED:
        if f and not f.search(file):
            continue
        if n and not n.search(name):
            continue
        if m and not m.search(message):
            continue
        return kind, why
    return "unexplained", message[:110]
