// Package constrain is kvlease's constrained decoding: a JSON Schema
// compiled to a byte-level automaton, and the mask of the tokens of a
// vocabulary that keep a text in it. A model samples only allowed tokens,
// so a text generated under a grammar always parses and validates against
// its schema, and when the text is complete ending it is the only choice.
//
// # Grammars
//
// Compile takes a JSON Schema; Any is OpenAI's JSON mode (any object);
// ToolCalls is the answer that calls one of a request's tools. The
// supported subset: type (a name or an array of names: object, array,
// string, number, integer, boolean, null), properties, required,
// additionalProperties (false, true or a schema), items, minItems,
// maxItems, minLength, maxLength (characters; a bounded string has no \u
// escapes, which could pair two into one character), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (a bounded number is generated as
// an integer within them), enum, const, anyOf and oneOf whose branches
// have distinct types (the first byte of a value tells which applies;
// one matches at most), allOf of one schema, and $ref to the root's
// $defs or definitions, compiled in place (a recursive reference is
// refused: its values could nest beyond any bound). Annotations (title,
// description, default, examples, $schema, ...) are ignored; any other
// keyword, and any keyword beside a combinator, is an *Error naming it. With strict, OpenAI's rules for strict
// schemas apply too (every object closes additionalProperties and
// requires all its properties).
//
// What a grammar generates is a subset of what the schema accepts, chosen
// so that generation always terminates and the text always parses:
//
//   - compact JSON: one optional space after ':' and ',' and before the
//     value, no other whitespace;
//   - an object with declared properties has only those, each at most
//     once, in any order, '}' only once the required ones are there; an
//     object without declared properties takes any keys (values of
//     additionalProperties' schema);
//   - numbers have at most 15 digits before the point, 15 after it and 2
//     in the exponent (finite as float64; integers exact);
//   - strings are valid UTF-8 (no overlong forms, no surrogates), with
//     JSON's escapes;
//   - free-form values (json_object, a schema with no type) nest at most
//     2×MaxDepth+2 containers.
//
// # States and masks
//
// A State is a position in a grammar: Feed accepts a byte if the text
// stays a prefix of some text of the grammar (every position is live: a
// complete text can always be reached). A State is a small value whose
// container stack is a persistent list, so copying one is cheap and
// copies are independent: a mask is computed by feeding each token's
// bytes to a copy.
//
// Vocab holds a model's vocabulary in a trie. Vocab.Mask walks the trie
// from a State and stops each branch at its first refused byte, so it
// visits only tokens whose prefixes are valid; inside a free string
// (where most tokens are valid) it starts from the precomputed set of
// tokens that a string takes whole and checks the others one by one.
//
// Everything here is deterministic and does no I/O.
package constrain
