package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/ardanlabs/jinja"
)

// jsonValue decodes JSON text into a template value as Python's
// json.loads would: objects keep their keys' order (a template's tojson
// and items print them in it), numbers with a '.' or an exponent are
// floats and the others integers.
func jsonValue(raw []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := d.Token(); err == nil {
		return jinja.Undefined(), errors.New("extra data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (jinja.Value, error) {
	t, err := d.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := t.(type) {
	case json.Delim:
		if t == '[' {
			items := []jinja.Value{}
			for d.More() {
				v, err := decodeValue(d)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			_, err := d.Token()
			return jinja.NewList(items), err
		}
		v := jinja.NewDict()
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return jinja.Undefined(), err
			}
			e, err := decodeValue(d)
			if err != nil {
				return jinja.Undefined(), err
			}
			v.AsDict().Set(k.(string), e)
		}
		_, err := d.Token()
		return v, err
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			if i, err := t.Int64(); err == nil {
				return jinja.NewInt(i), nil
			}
		}
		f, err := t.Float64()
		if err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewFloat(f), nil
	case string:
		return jinja.NewString(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Undefined(), errors.New("unexpected JSON token")
}
