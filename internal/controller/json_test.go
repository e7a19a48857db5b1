package controller_test

import "encoding/json"

func yamlJSON(v any) ([]byte, error) { return json.Marshal(v) }
