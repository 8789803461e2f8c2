"""FLOPs, hardware peaks and the efficiency figures built from them.

`shape` resolves a model's shape and counts its parameters, `formulas` turns a shape and a
batch into FLOPs per iteration, `peaks` is the dense peak table and device-name resolution,
`efficiency` combines them with a run's step time into TFLOPS/GPU, MFU and HFU.
"""
