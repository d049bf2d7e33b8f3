//! minfer's C ABI over Rust libraries. `chat_template` renders Hugging Face chat templates with minijinja;
//! llguidance's own C functions (`llg_*`, declared in its llguidance.h) come in through the dependency.
//! Strings cross the boundary as (pointer, length) in and NUL-terminated heap strings out, freed with
//! `minfer_string_free`.

mod chat_template;
mod python_json;

// Keeps llguidance's `#[no_mangle]` C API in the static library.
pub use llguidance;

use std::ffi::{c_char, CString};

/// Frees a string this library returned (a rendered prompt or an error message). Null is ignored.
#[no_mangle]
pub extern "C" fn minfer_string_free(s: *mut c_char) {
    if !s.is_null() {
        drop(unsafe { CString::from_raw(s) });
    }
}

/// A heap C string for the caller; interior NULs (not expected in templates' output) become U+FFFD.
pub(crate) fn to_c_string(s: String) -> *mut c_char {
    let s = if s.contains('\0') { s.replace('\0', "\u{FFFD}") } else { s };
    CString::new(s).expect("no interior NUL").into_raw()
}

pub(crate) unsafe fn str_from(ptr: *const c_char, len: usize) -> Result<&'static str, String> {
    if ptr.is_null() {
        return Ok("");
    }
    let bytes = std::slice::from_raw_parts(ptr as *const u8, len);
    std::str::from_utf8(bytes).map_err(|e| format!("not valid UTF-8: {e}"))
}
