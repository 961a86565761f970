// Package gam is GAM (Cai et al., VLDB 2018), as SELCC's evaluation runs
// it, on protocolapi.
package gam
