// Package chart owns rdmanet's Helm chart (charts/rdmanet) as code: it
// renders the chart with Helm's Go SDK as `helm template` does (Render),
// lints it as `helm lint` does (Lint), packages it reproducibly (Package),
// and builds the kustomize installation deploy/ with its components the way
// `kustomize build` does for the subset deploy/ uses (Kustomize), so that
// the tests can compare the two object by object (Diff) and neither can
// drift from the other.
package chart
