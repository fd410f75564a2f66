"""Stage 4 of the pipeline (after the cubin is read, :mod:`tileprobe.model`): what each hint did.

* :mod:`.verdict` — honoured / partial / ignored / infeasible per hint, against the reference build;
* :mod:`.advice` — what a CTA would need for the occupancy asked, and the advice a kernel author reads.
"""
