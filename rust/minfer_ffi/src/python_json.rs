//! `json.dumps` as Python writes it, for the `tojson` filter of chat templates. transformers renders templates
//! with its own tojson (json.dumps, ensure_ascii=False, no HTML escaping), so the separators (", " and ": "),
//! float spelling (1.0, 1e-05) and indentation here follow CPython's json module, not serde_json.

use minijinja::value::{Value, ValueKind};

pub struct Style {
    pub indent: Option<usize>,
    pub sort_keys: bool,
    pub ensure_ascii: bool,
    pub item_separator: String,
    pub key_separator: String,
}

impl Style {
    /// CPython's defaults: (", ", ": ") without indent, (",", ": ") with one.
    pub fn new(indent: Option<usize>) -> Style {
        let item = if indent.is_some() { "," } else { ", " };
        Style { indent, sort_keys: false, ensure_ascii: false, item_separator: item.into(), key_separator: ": ".into() }
    }
}

pub fn dumps(value: &Value, style: &Style) -> String {
    let mut out = String::new();
    write_value(value, style, 0, &mut out);
    out
}

fn write_value(value: &Value, style: &Style, depth: usize, out: &mut String) {
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(value, out),
        ValueKind::String => write_string(value.as_str().unwrap_or(""), style.ensure_ascii, out),
        ValueKind::Map => write_map(value, style, depth, out),
        ValueKind::Seq | ValueKind::Iterable => write_seq(value, style, depth, out),
        _ => write_string(&value.to_string(), style.ensure_ascii, out),
    }
}

fn newline(style: &Style, depth: usize, out: &mut String) {
    if let Some(indent) = style.indent {
        out.push('\n');
        out.extend(std::iter::repeat(' ').take(indent * depth));
    }
}

fn write_seq(value: &Value, style: &Style, depth: usize, out: &mut String) {
    let items: Vec<Value> = value.try_iter().map(|it| it.collect()).unwrap_or_default();
    if items.is_empty() {
        out.push_str("[]");
        return;
    }
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&style.item_separator);
        }
        newline(style, depth + 1, out);
        write_value(item, style, depth + 1, out);
    }
    newline(style, depth, out);
    out.push(']');
}

fn write_map(value: &Value, style: &Style, depth: usize, out: &mut String) {
    let mut keys: Vec<Value> = value.try_iter().map(|it| it.collect()).unwrap_or_default();
    if keys.is_empty() {
        out.push_str("{}");
        return;
    }
    if style.sort_keys {
        keys.sort_by_key(|k| k.to_string());
    }
    out.push('{');
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            out.push_str(&style.item_separator);
        }
        newline(style, depth + 1, out);
        // Python turns non-string keys into strings (True -> "true", 1 -> "1"); JSON input only has strings.
        let name = match key.kind() {
            ValueKind::String => key.as_str().unwrap_or("").to_string(),
            _ => {
                let mut s = String::new();
                write_value(key, style, 0, &mut s);
                s.trim_matches('"').to_string()
            }
        };
        write_string(&name, style.ensure_ascii, out);
        out.push_str(&style.key_separator);
        let item = value.get_item(key).unwrap_or(Value::UNDEFINED);
        write_value(&item, style, depth + 1, out);
    }
    newline(style, depth, out);
    out.push('}');
}

fn write_number(value: &Value, out: &mut String) {
    if value.is_integer() {
        out.push_str(&value.to_string());
        return;
    }
    match f64::try_from(value.clone()) {
        Ok(f) => out.push_str(&python_float_repr(f)),
        Err(_) => out.push_str(&value.to_string()),
    }
}

/// repr(float) in CPython: the shortest digits that round-trip, fixed notation for exponents -4..16, else
/// d.ddde+XX with at least two exponent digits; json spells the non-finite ones NaN / Infinity.
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let sci = format!("{:e}", f); // shortest round-trip digits: "-1.25e-7"
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::from(if negative { "-" } else { "" });
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            let padded = format!("{digits:0<int_len$}");
            let (int_part, frac) = padded.split_at(int_len);
            out.push_str(int_part);
            out.push('.');
            out.push_str(if frac.is_empty() { "0" } else { frac });
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat('0').take((-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&format!("e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs()));
    }
    out
}

fn write_string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04x}", unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_python_repr() {
        for (f, want) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (123456789012345.6, "123456789012345.6"),
            (-2.5e-7, "-2.5e-07"),
            (1.5e300, "1.5e+300"),
        ] {
            assert_eq!(python_float_repr(f), want);
        }
    }
}
