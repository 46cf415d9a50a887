//! A result as hosts get it: the JSON of a core view (structured content)
//! and a short Markdown text for people and models, cut to a size hosts
//! can take. Shared by resources, tools, prompts and the timeline.

use serde_json::{Value, json};

use super::error::Error;

/// Results (the JSON of one resource or tool call) larger than this many
/// bytes are cut: list entries are dropped from the end and the result
/// gets `"truncated": true` and a `truncation` note. Lists are paginated
/// and texts already capped at `core::state::MAX_TEXT_CHARS`, so this only
/// bites on a snapshot with huge app-provided context.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;

/// A rendered resource (or tool result).
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub json: Value,
    pub markdown: String,
}

/// A view as JSON (views always serialize; a failure is a bug, said so).
pub fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(|e| Error::Internal(format!("cannot render a view: {e}")))
}

/// The length of `v` as compact JSON, counted as it is written rather than
/// written to a buffer: every result is measured, and nearly all fit.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    serde_json::to_writer(&mut c, v).map_or(usize::MAX, |()| c.0)
}

/// Keep a result under [`MAX_RESULT_BYTES`]: drop entries from the end of
/// its largest list until it fits, and mark it.
pub fn fit(mut r: Rendered) -> Rendered {
    let size = json_len;
    let mut total = size(&r.json);
    if total <= MAX_RESULT_BYTES {
        return r;
    }
    let Value::Object(m) = &mut r.json else {
        return r;
    };
    // The size of every list entry, measured once; removing an entry
    // removes its bytes and a comma.
    let mut lists: Vec<(String, Vec<usize>)> = m
        .iter()
        .filter_map(|(k, v)| {
            v.as_array()
                .map(|a| (k.clone(), a.iter().map(size).collect()))
        })
        .collect();
    let mut cut: Vec<(String, usize)> = Vec::new();
    while total > MAX_RESULT_BYTES {
        let Some((k, sizes)) = lists
            .iter_mut()
            .filter(|(_, s)| !s.is_empty())
            .max_by_key(|(_, s)| s.iter().sum::<usize>())
        else {
            break;
        };
        let n = sizes.pop().unwrap_or(0);
        total = total.saturating_sub(n + 1);
        match cut.iter_mut().find(|(name, _)| name == k) {
            Some((_, c)) => *c += 1,
            None => cut.push((k.clone(), 1)),
        }
    }
    for (k, n) in &cut {
        if let Some(Value::Array(a)) = m.get_mut(k) {
            a.truncate(a.len().saturating_sub(*n));
        }
    }
    if total > MAX_RESULT_BYTES {
        // Nothing left to cut (one huge value): drop the lot.
        m.clear();
    }
    m.insert("truncated".into(), json!(true));
    m.insert(
        "truncation".into(),
        json!(format!(
            "{} this result was larger than {MAX_RESULT_BYTES} bytes; entries were dropped from the end of its lists",
            crate::core::state::TRUNCATION_MARKER
        )),
    );
    r.markdown.push_str(&format!(
        "\n{} (result larger than {MAX_RESULT_BYTES} bytes)\n",
        crate::core::state::TRUNCATION_MARKER
    ));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counted_length_is_the_written_length() {
        let v = json!({"a": [1, "ü", {"b": null}], "t": "x\"y\n"});
        assert_eq!(json_len(&v), serde_json::to_vec(&v).expect("json").len());
    }

    #[test]
    fn oversized_results_are_cut_and_marked() {
        let big: Vec<Value> = (0..1000)
            .map(|i| json!({"i": i, "pad": "x".repeat(1000)}))
            .collect();
        let r = fit(Rendered {
            json: json!({"windows": big}),
            markdown: String::new(),
        });
        let n = serde_json::to_vec(&r.json).map(|b| b.len()).unwrap_or(0);
        assert!(n <= MAX_RESULT_BYTES + 512, "{n}");
        assert_eq!(r.json["truncated"], json!(true));
        assert!(r.markdown.contains("truncated"));
    }
}
