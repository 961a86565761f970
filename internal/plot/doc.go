// Package plot draws line charts as self-contained SVG: the plots of
// `scalestore figure NAME --svg FILE`. It knows nothing of the simulator:
// it takes named series of numbers over labelled x positions. It must never
// import anything beyond the standard library, and the SVG it writes
// references nothing outside itself (no fonts, scripts or stylesheets to
// fetch).
package plot
