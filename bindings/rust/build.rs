//! Finds libllmrt: $LLMRT_LIB_DIR, else `pkg-config llmrt`, else the in-repo
//! build directory (`../../build/lib`, then `../../build-bind/lib`).
//! The directory is also written as an rpath so tests and examples run
//! without LD_LIBRARY_PATH.
use std::path::PathBuf;
use std::process::Command;

fn pkg_config_libdir() -> Option<String> {
    let out = Command::new("pkg-config").args(["--variable=libdir", "llmrt"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if dir.is_empty() { None } else { Some(dir) }
}

fn main() {
    println!("cargo:rerun-if-env-changed=LLMRT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let repo = manifest.join("..").join("..");
    let dir = std::env::var("LLMRT_LIB_DIR")
        .ok()
        .filter(|d| !d.is_empty())
        .or_else(pkg_config_libdir)
        .unwrap_or_else(|| {
            let candidates = [repo.join("build").join("lib"), repo.join("build-bind").join("lib")];
            let found = candidates.iter().find(|d| d.join("libllmrt.so").exists());
            found.unwrap_or(&candidates[0]).display().to_string()
        });
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:rustc-link-lib=dylib=llmrt");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    println!("cargo:libdir={dir}");
}
