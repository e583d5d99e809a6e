// JSON Schema -> grammar nodes (grammar.h). Supported keywords (the table in
// docs/json-schema.md): type (object, array, string, number, integer, boolean,
// null, or a list of them), properties (at most 64), required,
// additionalProperties (false, true or a schema), enum, const, anyOf, oneOf,
// $ref (JSON pointers into the document: "#", "#/$defs/x",
// "#/definitions/x"; recursion allowed) with $defs / definitions, items (one
// schema), minItems, maxItems, minLength, maxLength (code points), minimum,
// maximum, exclusiveMinimum, exclusiveMaximum (numbers compared as exact
// decimals: number_range.h), pattern (regex.h's subset). Annotations are
// accepted and have no effect: title, description, default, examples,
// $comment, $schema, deprecated, readOnly, writeOnly. Any other keyword is
// refused with InvalidArgument naming it and where it is.
//
// A schema is an object or a boolean: `true` admits every value, `false`
// none (a property so named cannot appear, items false leave only [], an
// alternative false is never taken). A schema without `type` admits every
// type, each with the keywords that apply to it. enum/const admit their values
// (spelled as compact JSON, object keys in the order given) and combine with
// `type` only. Keywords beside anyOf/oneOf or $ref apply too: they are merged
// into each alternative or into the referenced schema (`type` intersects,
// `required` unites, `properties` and `items` merge, bounds keep the tighter;
// a keyword both sides constrain otherwise is refused, never guessed).
// Numbers: at most 20 digits before and after the point and 2 exponent digits
// (every accepted number is finite); integers: at most 19 digits, no "-0".
#pragma once

#include <nlohmann/json.hpp>

#include "shared/grammar/grammar.h"
#include "shared/status.h"

namespace k3::grammar {

// Adds the nodes of `schema` to *g; returns the node of the schema's value.
// *has_false (when given) tells whether a `false` sub-schema (or keywords
// with no value in common) was compiled: a schema that admits nothing because
// it says so, not by a $ref cycle that never reaches a value.
StatusOr<int32_t> compile_schema(const nlohmann::ordered_json& schema, Grammar* g,
                                 bool* has_false = nullptr);

// A node that admits any JSON value (json_object's values), added once per
// grammar and shared.
int32_t any_value_node(Grammar* g);
// Any JSON object.
int32_t any_object_node(Grammar* g);

}  // namespace k3::grammar
