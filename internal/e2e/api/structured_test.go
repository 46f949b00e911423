package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/kvlease/kvlease/internal/e2e"
)

// personSchema is a nested, strict schema: objects in objects, an array
// of enum strings with bounds, a nullable field, every scalar type.
var personSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"name":   map[string]any{"type": "string"},
		"age":    map[string]any{"type": "integer"},
		"score":  map[string]any{"type": "number"},
		"active": map[string]any{"type": "boolean"},
		"tags": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []string{"red", "green", "blue"}},
			"minItems": 1, "maxItems": 3},
		"address": map[string]any{"type": "object", "properties": map[string]any{
			"city": map[string]any{"type": "string"},
			"zip":  map[string]any{"type": []string{"string", "null"}},
			"geo": map[string]any{"type": "object", "properties": map[string]any{
				"lat": map[string]any{"type": "number"}, "lon": map[string]any{"type": "number"}},
				"required": []string{"lat", "lon"}, "additionalProperties": false},
		}, "required": []string{"city", "zip", "geo"}, "additionalProperties": false},
	},
	"required":             []string{"name", "age", "score", "active", "tags", "address"},
	"additionalProperties": false,
}

type person struct {
	Name    *string  `json:"name"`
	Age     *int64   `json:"age"`
	Score   *float64 `json:"score"`
	Active  *bool    `json:"active"`
	Tags    []string `json:"tags"`
	Address *struct {
		City *string         `json:"city"`
		Zip  json.RawMessage `json:"zip"`
		Geo  *struct {
			Lat *float64 `json:"lat"`
			Lon *float64 `json:"lon"`
		} `json:"geo"`
	} `json:"address"`
}

// strictDecode decodes text into v refusing unknown fields and trailing
// data.
func strictDecode(text string, v any) error {
	d := json.NewDecoder(bytes.NewReader([]byte(text)))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

// validPerson checks text against personSchema.
func validPerson(text string) error {
	var p person
	if err := strictDecode(text, &p); err != nil {
		return err
	}
	if p.Name == nil || p.Age == nil || p.Score == nil || p.Active == nil || p.Tags == nil || p.Address == nil {
		return fmt.Errorf("a required property is missing")
	}
	if len(p.Tags) < 1 || len(p.Tags) > 3 {
		return fmt.Errorf("%d tags", len(p.Tags))
	}
	for _, tag := range p.Tags {
		if !slices.Contains([]string{"red", "green", "blue"}, tag) {
			return fmt.Errorf("tag %q is not in the enum", tag)
		}
	}
	a := p.Address
	if a.City == nil || a.Zip == nil || a.Geo == nil || a.Geo.Lat == nil || a.Geo.Lon == nil {
		return fmt.Errorf("a required address property is missing")
	}
	var zip *string
	if err := json.Unmarshal(a.Zip, &zip); err != nil {
		return fmt.Errorf("zip: %v", err)
	}
	return nil
}

func jsonSchemaFormat(name string, schema any) openai.ChatCompletionNewParamsResponseFormatUnion {
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: name, Schema: schema, Strict: openai.Bool(true)}}}
}

var jsonObjectFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}

// Structured output always parses and validates: 200 seeded requests,
// json_object and a nested strict json_schema, greedy and sampled, whole
// and streamed.
func TestSDKStructuredOutput(t *testing.T) {
	e := startEngine(t, engineOpts{profile: "zero"})
	c := e.client()
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		p := openai.ChatCompletionNewParams{
			Model:     modelName,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("Describe person %d as JSON.", i))},
			MaxTokens: openai.Int(3000),
			Seed:      openai.Int(int64(i)),
		}
		if i%3 != 0 {
			p.Temperature = openai.Float(1)
		} else {
			p.Temperature = openai.Float(0)
		}
		schema := i%2 == 0
		if schema {
			p.ResponseFormat = jsonSchemaFormat("person", personSchema)
		} else {
			p.ResponseFormat = jsonObjectFormat
		}
		var text string
		var finish string
		if i%4 == 1 {
			stream := c.Chat.Completions.NewStreaming(ctx, p)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			text, finish = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason
		} else {
			r, err := c.Chat.Completions.New(ctx, p)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			text, finish = r.Choices[0].Message.Content, r.Choices[0].FinishReason
		}
		if finish != "stop" {
			t.Fatalf("request %d: finish_reason %q after %q", i, finish, text)
		}
		if schema {
			if err := validPerson(text); err != nil {
				t.Fatalf("request %d: %q does not validate: %v", i, text, err)
			}
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			t.Fatalf("request %d: %q is not a JSON object: %v", i, text, err)
		}
	}
	// n choices each follow the schema.
	pn := openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(3000), N: openai.Int(3), Seed: openai.Int(5),
		Temperature: openai.Float(1), ResponseFormat: jsonSchemaFormat("person", personSchema),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Three people.")}}
	rn, err := c.Chat.Completions.New(ctx, pn)
	if err != nil || len(rn.Choices) != 3 {
		t.Fatalf("n=3: %v", err)
	}
	for _, ch := range rn.Choices {
		if err := validPerson(ch.Message.Content); err != nil || ch.FinishReason != "stop" {
			t.Fatalf("n=3 choice %d: %q (%s): %v", ch.Index, ch.Message.Content, ch.FinishReason, err)
		}
	}
	// The completions endpoint takes response_format too (vLLM's does).
	r, err := c.Completions.New(ctx, completion("JSON please:", 3000), option.WithJSONSet("response_format", map[string]any{"type": "json_object"}))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(r.Choices[0].Text), &obj); err != nil {
		t.Errorf("completions: %q is not a JSON object: %v", r.Choices[0].Text, err)
	}
	// max_tokens running out mid-JSON ends with length, as OpenAI's does.
	p := openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(5), ResponseFormat: jsonSchemaFormat("person", personSchema),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Person?")}}
	cut, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if cut.Choices[0].FinishReason != "length" || json.Valid([]byte(cut.Choices[0].Message.Content)) {
		t.Errorf("max_tokens 5: finish %q, text %q", cut.Choices[0].FinishReason, cut.Choices[0].Message.Content)
	}
	// An unsupported schema keyword is a 400 naming it.
	bad := map[string]any{"type": "object", "properties": map[string]any{"email": map[string]any{"type": "string", "format": "email"}},
		"required": []string{"email"}, "additionalProperties": false}
	p.ResponseFormat = jsonSchemaFormat("bad", bad)
	_, err = c.Chat.Completions.New(ctx, p)
	checkFieldAnswer(t, fieldCase{field: "response_format.json_schema.schema.properties.email.format"}, err)
}

var (
	weatherParams = map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"},
		"unit": map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
		"days": map[string]any{"type": "integer"},
	}, "required": []string{"city", "unit"}, "additionalProperties": false}
	timeParams = map[string]any{"type": "object", "properties": map[string]any{
		"zone": map[string]any{"type": "string"},
	}, "required": []string{"zone"}, "additionalProperties": false}
	testTools = []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: weatherParams}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time", Parameters: timeParams}),
	}
)

// validCall checks a call's arguments against its tool's parameters.
func validCall(name, args string) error {
	switch name {
	case "get_weather":
		var a struct {
			City *string `json:"city"`
			Unit *string `json:"unit"`
			Days *int64  `json:"days"`
		}
		if err := strictDecode(args, &a); err != nil {
			return err
		}
		if a.City == nil || a.Unit == nil || (*a.Unit != "celsius" && *a.Unit != "fahrenheit") {
			return fmt.Errorf("bad arguments %s", args)
		}
	case "get_time":
		var a struct {
			Zone *string `json:"zone"`
		}
		if err := strictDecode(args, &a); err != nil {
			return err
		}
		if a.Zone == nil {
			return fmt.Errorf("no zone in %s", args)
		}
	default:
		return fmt.Errorf("unknown tool %q", name)
	}
	return nil
}

// toolAnswer is a chat answer reduced to what the tests compare.
type toolAnswer struct {
	content string
	calls   []openai.ChatCompletionMessageToolCallUnion
	finish  string
}

func askTools(t *testing.T, c openai.Client, p openai.ChatCompletionNewParams, stream bool) toolAnswer {
	t.Helper()
	ctx := context.Background()
	if !stream {
		r, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		ch := r.Choices[0]
		return toolAnswer{ch.Message.Content, ch.Message.ToolCalls, ch.FinishReason}
	}
	s := c.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		if !acc.AddChunk(s.Current()) {
			t.Fatalf("the accumulator refused chunk %+v", s.Current())
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	ch := acc.Choices[0]
	return toolAnswer{ch.Message.Content, ch.Message.ToolCalls, ch.FinishReason}
}

// checkCalls checks an answer is complete, schema-valid tool calls, at
// most max of them (and of want's function, when set).
func checkCalls(t *testing.T, what string, a toolAnswer, maxCalls int, want string) {
	t.Helper()
	if a.finish != "tool_calls" || len(a.calls) == 0 || len(a.calls) > maxCalls || a.content != "" {
		t.Fatalf("%s: finish %q, %d calls, content %q", what, a.finish, len(a.calls), a.content)
	}
	ids := map[string]bool{}
	for _, call := range a.calls {
		if call.Type != "function" || call.ID == "" || ids[call.ID] {
			t.Fatalf("%s: call %+v", what, call)
		}
		ids[call.ID] = true
		if want != "" && call.Function.Name != want {
			t.Fatalf("%s: called %q, want %q", what, call.Function.Name, want)
		}
		if err := validCall(call.Function.Name, call.Function.Arguments); err != nil {
			t.Fatalf("%s: %s(%s): %v", what, call.Function.Name, call.Function.Arguments, err)
		}
	}
}

// Tools with each tool_choice: schema-valid tool_calls, whole and
// streamed (the SDK's accumulator rebuilds the streamed calls).
func TestSDKToolCalls(t *testing.T) {
	e := startEngine(t, engineOpts{profile: "zero"})
	c := e.client()
	base := func(seed int) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:     modelName,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("What is the weather in city %d?", seed))},
			MaxTokens: openai.Int(3000),
			Seed:      openai.Int(int64(seed)),
			Tools:     testTools,
		}
	}
	for seed := 0; seed < 12; seed++ {
		for _, stream := range []bool{false, true} {
			what := fmt.Sprintf("seed %d stream %v", seed, stream)
			p := base(seed)
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
			checkCalls(t, what+" required", askTools(t, c, p, stream), 16, "")
			p.ParallelToolCalls = openai.Bool(false)
			checkCalls(t, what+" required, not parallel", askTools(t, c, p, stream), 1, "")
			p = base(seed)
			p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"})
			checkCalls(t, what+" named", askTools(t, c, p, stream), 1, "get_time")
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
			if a := askTools(t, c, p, stream); len(a.calls) != 0 || a.finish == "tool_calls" {
				t.Fatalf("%s none: %+v", what, a)
			}
		}
	}
	// A conversation goes on after a call: the assistant's call and the
	// tool's answer go back in the messages (the call is rendered into
	// the prompt as the model wrote it).
	p := base(1)
	p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	r, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	p.Messages = append(p.Messages, r.Choices[0].Message.ToParam())
	for _, call := range r.Choices[0].Message.ToolCalls {
		p.Messages = append(p.Messages, openai.ToolMessage("sunny", call.ID))
	}
	p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
	next, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil || next.Usage.PromptTokens <= r.Usage.CompletionTokens {
		t.Fatalf("the next turn: %v, %+v", err, next)
	}
	// n > 1 with calls is refused, naming n.
	p = base(1)
	p.N = openai.Int(2)
	p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	_, err = c.Chat.Completions.New(context.Background(), p)
	checkFieldAnswer(t, fieldCase{field: "n"}, err)
	// auto: the model chooses a call or text with its first token; over
	// seeds both happen, and each answer is one or the other, whole.
	calls, texts := 0, 0
	for seed := 0; seed < 400 && (calls < 3 || texts < 3); seed++ {
		p := base(seed)
		p.Temperature = openai.Float(1)
		whole := askTools(t, c, p, false)
		streamed := askTools(t, c, p, true)
		if len(whole.calls) > 0 {
			calls++
			checkCalls(t, fmt.Sprintf("auto seed %d", seed), whole, 16, "")
			checkCalls(t, fmt.Sprintf("auto seed %d streamed", seed), streamed, 16, "")
		} else {
			texts++
			if whole.content == "" || whole.finish == "tool_calls" || streamed.content != whole.content {
				t.Fatalf("auto seed %d: text answer %+v, streamed %+v", seed, whole, streamed)
			}
		}
		if len(whole.calls) != len(streamed.calls) {
			t.Fatalf("auto seed %d: %d calls whole, %d streamed", seed, len(whole.calls), len(streamed.calls))
		}
		for i := range whole.calls {
			if !sameCall(whole.calls[i], streamed.calls[i]) {
				t.Fatalf("auto seed %d: call %d whole %+v, streamed %+v", seed, i, whole.calls[i], streamed.calls[i])
			}
		}
	}
	if calls < 3 || texts < 3 {
		t.Errorf("auto: %d call answers, %d text answers; want both", calls, texts)
	}
	t.Logf("auto: %d call answers, %d text answers", calls, texts)
}

// P/D through the proxy equals a single engine under constrained
// decoding: structured output and tool calls, whole and streamed.
func TestSDKConstrainedPDMatchesSingleEngine(t *testing.T) {
	c := startPD(t)
	px := sdkClient(startProxy(t, c.p, c.d, nil), "")
	single := c.single.client()
	for seed := 0; seed < 6; seed++ {
		p := openai.ChatCompletionNewParams{
			Model:       modelName,
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(pdPrompt)},
			MaxTokens:   openai.Int(3000),
			Seed:        openai.Int(int64(seed)),
			Temperature: openai.Float(1),
		}
		switch seed % 3 {
		case 0:
			p.ResponseFormat = jsonSchemaFormat("person", personSchema)
		case 1:
			p.ResponseFormat = jsonObjectFormat
		case 2:
			p.Tools = testTools
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		}
		for _, stream := range []bool{false, true} {
			got := askTools(t, px, p, stream)
			want := askTools(t, single, p, stream)
			if got.content != want.content || got.finish != want.finish || len(got.calls) != len(want.calls) {
				t.Fatalf("seed %d stream %v: P/D %+v, single %+v", seed, stream, got, want)
			}
			for i := range got.calls {
				if !sameCall(got.calls[i], want.calls[i]) {
					t.Fatalf("seed %d: call %d P/D %+v, single %+v", seed, i, got.calls[i].Function, want.calls[i].Function)
				}
			}
			if seed%3 == 0 {
				if err := validPerson(got.content); err != nil {
					t.Fatalf("seed %d: %q: %v", seed, got.content, err)
				}
			}
		}
	}
	e2e.WaitFor(t, "P to free the read blocks", func() bool { return c.pHeld(t) == 0 })
}

func sameCall(a, b openai.ChatCompletionMessageToolCallUnion) bool {
	return a.Function.Name == b.Function.Name && a.Function.Arguments == b.Function.Arguments
}

// orderSchema is written as schema generators write nested types: $defs
// and $ref, a $ref wrapped in allOf for its description, a nullable field
// as anyOf with null, bounds on strings, numbers and arrays.
var orderSchema = json.RawMessage(`{
  "$defs": {
    "Item": {"type": "object", "properties": {
      "sku": {"type": "string", "minLength": 3, "maxLength": 8},
      "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
      "required": ["sku", "qty"], "additionalProperties": false},
    "Status": {"type": "string", "enum": ["open", "paid", "shipped"]}
  },
  "type": "object",
  "properties": {
    "id": {"type": "integer", "exclusiveMinimum": 1000, "maximum": 99999},
    "status": {"allOf": [{"$ref": "#/$defs/Status"}], "description": "where the order is"},
    "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1, "maxItems": 4},
    "note": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]}
  },
  "required": ["id", "status", "items", "note"],
  "additionalProperties": false
}`)

func validOrder(text string) error {
	var o struct {
		ID     *int64  `json:"id"`
		Status *string `json:"status"`
		Items  []struct {
			SKU *string `json:"sku"`
			Qty *int64  `json:"qty"`
		} `json:"items"`
		Note json.RawMessage `json:"note"`
	}
	if err := strictDecode(text, &o); err != nil {
		return err
	}
	if o.ID == nil || *o.ID <= 1000 || *o.ID > 99999 || o.Status == nil || !slices.Contains([]string{"open", "paid", "shipped"}, *o.Status) ||
		len(o.Items) < 1 || len(o.Items) > 4 || o.Note == nil {
		return fmt.Errorf("out of the schema")
	}
	for _, it := range o.Items {
		if it.SKU == nil || len([]rune(*it.SKU)) < 3 || len([]rune(*it.SKU)) > 8 || it.Qty == nil || *it.Qty < 1 || *it.Qty > 99 {
			return fmt.Errorf("item out of the schema")
		}
	}
	var note *string
	if err := json.Unmarshal(o.Note, &note); err != nil || (note != nil && len([]rune(*note)) > 20) {
		return fmt.Errorf("note out of the schema")
	}
	return nil
}

// A schema as generators write it ($defs, $ref, allOf, anyOf with null,
// bounds) constrains every answer.
func TestSDKGeneratedSchema(t *testing.T) {
	e := startEngine(t, engineOpts{profile: "zero"})
	c := e.client()
	var schema map[string]any
	if err := json.Unmarshal(orderSchema, &schema); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		p := openai.ChatCompletionNewParams{
			Model:          modelName,
			Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("Order %d?", i))},
			MaxTokens:      openai.Int(3000),
			Seed:           openai.Int(int64(i)),
			Temperature:    openai.Float(1),
			ResponseFormat: jsonSchemaFormat("order", schema),
		}
		r, err := c.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		ch := r.Choices[0]
		if err := validOrder(ch.Message.Content); err != nil || ch.FinishReason != "stop" {
			t.Fatalf("request %d: %q (%s): %v", i, ch.Message.Content, ch.FinishReason, err)
		}
	}
}
