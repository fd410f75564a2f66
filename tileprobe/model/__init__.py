"""Readers and hardware models, independent of the pipeline: arch limits, occupancy, cubin, SASS, remarks."""
