//! Tools: OpenAI `function` tools as Anthropic tool definitions (`input_schema` made
//! acceptable to Anthropic's validator), and `tool_choice` / `parallel_tool_calls` as
//! Anthropic's `tool_choice`.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::refusal::Refusal;
use super::request::field;

/// JSON Schema keywords Anthropic refuses at the root of a tool's `input_schema`.
const ROOT_UNIONS: [&str; 3] = ["oneOf", "allOf", "anyOf"];

/// `tools` as Anthropic tool definitions and `tool_choice` / `parallel_tool_calls` as
/// Anthropic's `tool_choice`.
pub(super) fn add(body: &Map<String, Value>, out: &mut Map<String, Value>) -> Result<(), Refusal> {
    let tools = match field(body, "tools") {
        None => return Ok(()),
        Some(Value::Array(tools)) => convert_tools(tools)?,
        Some(other) => {
            return Err(Refusal::Tools {
                value: other.clone(),
            });
        }
    };
    if tools.is_empty() {
        return Ok(());
    }
    let mut choice = tool_choice(field(body, "tool_choice"))?;
    if field(body, "parallel_tool_calls").and_then(Value::as_bool) == Some(false)
        && choice["type"] != "none"
    {
        choice["disable_parallel_tool_use"] = json!(true);
    }
    out.insert("tools".into(), Value::Array(tools));
    out.insert("tool_choice".into(), choice);
    Ok(())
}

/// OpenAI's `tool_choice` in Anthropic's words. `none` stays `none` (Anthropic has it): the
/// tools stay defined, so earlier `tool_use` blocks in the conversation remain valid.
fn tool_choice(choice: Option<&Value>) -> Result<Value, Refusal> {
    let named = |v: &Value| {
        v.pointer("/function/name")
            .and_then(Value::as_str)
            .map(|name| json!({"type": "tool", "name": name}))
    };
    match choice {
        None => Ok(json!({"type": "auto"})),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok(json!({"type": "auto"})),
            "none" => Ok(json!({"type": "none"})),
            "required" => Ok(json!({"type": "any"})),
            other => Err(Refusal::ToolChoiceWord { word: other.into() }),
        },
        Some(v) => named(v).ok_or_else(|| Refusal::ToolChoiceUnnamed { value: v.clone() }),
    }
}

/// OpenAI `function` tools as `{name, description, input_schema}`. A repeated name is
/// dropped (Anthropic refuses the request; the first definition wins, as in the original).
fn convert_tools(tools: &[Value]) -> Result<Vec<Value>, Refusal> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let kind = tool
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("function");
        if kind != "function" {
            return Err(Refusal::ToolType {
                tool: i,
                kind: kind.into(),
            });
        }
        let function = tool.get("function").unwrap_or(&Value::Null);
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or(Refusal::ToolName { tool: i })?;
        if !seen.insert(name) {
            continue;
        }
        let mut converted = json!({
            "name": name,
            "description": function.get("description").and_then(Value::as_str).unwrap_or(""),
            "input_schema": input_schema(function.get("parameters")),
        });
        if let Some(cache) = tool.get("cache_control").filter(|c| c.is_object()) {
            converted["cache_control"] = cache.clone();
        }
        out.push(converted);
    }
    Ok(out)
}

/// A function's `parameters` as an `input_schema` Anthropic's validator accepts: nullable
/// unions collapsed, no union keyword at the root, `properties` present on an object.
fn input_schema(parameters: Option<&Value>) -> Value {
    let empty = || json!({"type": "object", "properties": {}});
    let Some(schema) = parameters.filter(|p| p.as_object().is_some_and(|o| !o.is_empty())) else {
        return empty();
    };
    let Value::Object(mut schema) = strip_nullable_unions(schema) else {
        return empty();
    };
    if ROOT_UNIONS.iter().any(|k| schema.contains_key(*k)) {
        for k in ROOT_UNIONS {
            schema.remove(k);
        }
        schema.entry("type").or_insert_with(|| json!("object"));
    }
    if schema.get("type") == Some(&json!("object"))
        && !schema.get("properties").is_some_and(Value::is_object)
    {
        schema.insert("properties".into(), json!({}));
    }
    Value::Object(schema)
}

/// Collapses every `anyOf` / `oneOf` of exactly one schema and `{"type": "null"}` (what
/// Pydantic and MCP emit for an optional field) to that schema, keeping the union's
/// `title`, `description`, `default` and `examples`: Anthropic refuses the null branch, and
/// optionality is already said by the parent's `required`.
fn strip_nullable_unions(schema: &Value) -> Value {
    match schema {
        Value::Array(items) => Value::Array(items.iter().map(strip_nullable_unions).collect()),
        Value::Object(map) => {
            let stripped: Map<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), strip_nullable_unions(v)))
                .collect();
            for key in ["anyOf", "oneOf"] {
                let Some(Value::Array(variants)) = stripped.get(key) else {
                    continue;
                };
                let non_null: Vec<&Value> = variants
                    .iter()
                    .filter(|v| v.get("type") != Some(&json!("null")))
                    .collect();
                if let [only] = non_null[..]
                    && variants.len() > 1
                {
                    let mut replacement = only.as_object().cloned().unwrap_or_default();
                    for meta in ["title", "description", "default", "examples"] {
                        // `default` beside `$ref` is refused by strict validators.
                        let refused = meta == "default" && replacement.contains_key("$ref");
                        if let Some(v) = stripped.get(meta)
                            && !replacement.contains_key(meta)
                            && !refused
                        {
                            replacement.insert(meta.into(), v.clone());
                        }
                    }
                    return strip_nullable_unions(&Value::Object(replacement));
                }
            }
            Value::Object(stripped)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use crate::anthropic::testing::{convert, refused, request};
    use serde_json::json;

    #[test]
    fn tools_become_input_schemas() {
        let mut body = request(json!([{"role": "user", "content": "hi"}]));
        body["tools"] = json!([
            {"type": "function", "function": {
                "name": "search",
                "description": "Search the web",
                "parameters": {"type": "object", "properties": {
                    "q": {"type": "string"},
                    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null, "title": "Limit"},
                }, "required": ["q"]},
            }},
            {"type": "function", "function": {"name": "now"}},
            {"type": "function", "function": {"name": "search", "description": "duplicate"}},
            {"type": "function", "function": {"name": "pick", "parameters": {
                "oneOf": [{"type": "object"}, {"type": "string"}],
            }}},
        ]);
        let out = convert(&body);
        assert_eq!(
            out["tools"],
            json!([
                {"name": "search", "description": "Search the web", "input_schema": {
                    "type": "object", "properties": {
                        "q": {"type": "string"},
                        "limit": {"type": "integer", "default": null, "title": "Limit"},
                    }, "required": ["q"],
                }},
                {"name": "now", "description": "", "input_schema": {"type": "object", "properties": {}}},
                {"name": "pick", "description": "", "input_schema": {"type": "object", "properties": {}}},
            ])
        );
        assert_eq!(out["tool_choice"], json!({"type": "auto"}));
        body["tools"] = json!([{"type": "custom", "custom": {"name": "x"}}]);
        assert!(refused(&body).contains("`custom`"));
        body["tools"] = json!([{"type": "function", "function": {}}]);
        assert!(refused(&body).contains("function.name"));
    }

    #[test]
    fn tool_choice_and_parallel_tool_calls_are_mapped() {
        let mut body = request(json!([{"role": "user", "content": "hi"}]));
        body["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
        for (choice, expected) in [
            (json!("auto"), json!({"type": "auto"})),
            (json!("none"), json!({"type": "none"})),
            (json!("required"), json!({"type": "any"})),
            (
                json!({"type": "function", "function": {"name": "f"}}),
                json!({"type": "tool", "name": "f"}),
            ),
        ] {
            body["tool_choice"] = choice.clone();
            let out = convert(&body);
            assert_eq!(out["tool_choice"], expected, "{choice}");
            assert_eq!(out["tools"].as_array().unwrap().len(), 1, "{choice}");
        }
        body["parallel_tool_calls"] = json!(false);
        assert_eq!(
            convert(&body)["tool_choice"],
            json!({"type": "tool", "name": "f", "disable_parallel_tool_use": true})
        );
        body["tool_choice"] = json!("f");
        assert!(refused(&body).contains("`tool_choice`"));
        body["tool_choice"] = json!({"type": "function"});
        assert!(refused(&body).contains("names no function"));
        body["tools"] = json!([]);
        let out = convert(&body);
        assert!(out.get("tools").is_none() && out.get("tool_choice").is_none());
    }
}
