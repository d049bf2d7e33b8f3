//! Chat templates rendered the way Hugging Face transformers renders them (apply_chat_template): Jinja with
//! trim_blocks, lstrip_blocks and loop controls, `raise_exception`, `strftime_now`, a Python-compatible
//! `tojson`, and Python's string / dict / list methods (minijinja-contrib's pycompat) that templates call.

use std::cell::Cell;
use std::ffi::c_char;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Serde, Value};
use minijinja::{Environment, Error, ErrorKind};

use crate::python_json;
use crate::{str_from, to_c_string};

const NAME: &str = "chat_template";

/// A compiled template; rendering is thread-safe (the environment is immutable after compilation).
pub struct MinferChatTemplate {
    env: Environment<'static>,
}

thread_local! {
    // strftime_now's clock for the render on this thread: Some(unix seconds) pins it (tests), None = now.
    static NOW: Cell<Option<i64>> = const { Cell::new(None) };
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

fn strftime_now(format: String) -> Result<String, Error> {
    let now = match NOW.with(|n| n.get()) {
        Some(seconds) => jiff::Timestamp::from_second(seconds)
            .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?
            .to_zoned(jiff::tz::TimeZone::UTC),
        None => jiff::Zoned::now(),
    };
    // Python's strftime; jiff's directives are the same for those templates use (%d %b %Y %B %m %H ...).
    jiff::fmt::strtime::format(format.as_str(), &now)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("strftime_now({format:?}): {e}")))
}

/// tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) as transformers defines it.
fn tojson(value: Value, ensure_ascii: Option<bool>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let indent = match indent {
        Some(v) if !v.is_none() => Some(usize::try_from(v)?),
        _ => None,
    };
    let mut style = python_json::Style::new(indent);
    style.ensure_ascii = match kwargs.get::<Option<bool>>("ensure_ascii")? {
        Some(b) => b,
        None => ensure_ascii.unwrap_or(false),
    };
    style.sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    if let Some(separators) = kwargs.get::<Option<Value>>("separators")? {
        if !separators.is_none() {
            style.item_separator = separators.get_item_by_index(0)?.to_string();
            style.key_separator = separators.get_item_by_index(1)?.to_string();
        }
    }
    kwargs.assert_all_used()?;
    Ok(Value::from_safe_string(python_json::dumps(&value, &style)))
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build().expect("valid syntax"));
    minijinja_contrib::add_to_environment(&mut env);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_filter("tojson", tojson);
    env
}

/// "line 12: message" for an error of the template (its source line when known).
fn describe(err: &Error) -> String {
    let what = match (err.kind(), err.detail()) {
        (ErrorKind::InvalidOperation, Some(detail)) => detail.to_string(),
        (kind, Some(detail)) => format!("{kind}: {detail}"),
        (kind, None) => kind.to_string(),
    };
    match err.line() {
        Some(line) => format!("line {line}: {what}"),
        None => what,
    }
}

/// Compiles a template. Returns null and sets *error (free with minfer_string_free) on a syntax error.
#[no_mangle]
pub unsafe extern "C" fn minfer_chat_template_new(
    source: *const c_char,
    len: usize,
    error: *mut *mut c_char,
) -> *mut MinferChatTemplate {
    let result = std::panic::catch_unwind(|| -> Result<MinferChatTemplate, String> {
        let source = str_from(source, len)?.to_string();
        let mut env = environment();
        env.add_template_owned(NAME, source).map_err(|e| describe(&e))?;
        Ok(MinferChatTemplate { env })
    });
    match result {
        Ok(Ok(t)) => Box::into_raw(Box::new(t)),
        Ok(Err(message)) => {
            *error = to_c_string(message);
            std::ptr::null_mut()
        }
        Err(_) => {
            *error = to_c_string("the template compiler panicked".into());
            std::ptr::null_mut()
        }
    }
}

/// Renders with the variables of a JSON object (messages, add_generation_prompt, tools, bos_token, ...).
/// now_unix >= 0 pins strftime_now to that time (UTC); < 0 uses the clock. Returns true and sets *out to the
/// text, or false and sets *out to the error ("line N: ...").
#[no_mangle]
pub unsafe extern "C" fn minfer_chat_template_render(
    template: *const MinferChatTemplate,
    context_json: *const c_char,
    len: usize,
    now_unix: i64,
    out: *mut *mut c_char,
) -> bool {
    let template = &*template;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<String, String> {
        let context: serde_json::Value =
            serde_json::from_str(str_from(context_json, len)?).map_err(|e| format!("context: {e}"))?;
        NOW.with(|n| n.set(if now_unix >= 0 { Some(now_unix) } else { None }));
        let tmpl = template.env.get_template(NAME).map_err(|e| describe(&e))?;
        tmpl.render(Value::from(Serde(&context))).map_err(|e| describe(&e))
    }));
    let (ok, text) = match result {
        Ok(Ok(text)) => (true, text),
        Ok(Err(message)) => (false, message),
        Err(_) => (false, "the template renderer panicked".to_string()),
    };
    *out = to_c_string(text);
    ok
}

#[no_mangle]
pub unsafe extern "C" fn minfer_chat_template_free(template: *mut MinferChatTemplate) {
    if !template.is_null() {
        drop(Box::from_raw(template));
    }
}
