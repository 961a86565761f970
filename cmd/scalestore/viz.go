package main

import (
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/scalestore-go/scalestore/checker"
)

func writeViz(path string, info any) error {
	li, ok := info.(porcupine.LinearizationInfo)
	if !ok {
		return fmt.Errorf("no linearization info")
	}
	return checker.WriteVisualization(path, li)
}
