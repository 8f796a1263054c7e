"""Pieces shared by the RG-LRU and SAMU scans: reference math, Triton kernels, custom ops."""
