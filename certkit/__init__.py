"""certkit: machine-checkable certificates for the approximation rank of softmax attention.

r_eps(A) = min { rank B : max_i ||A_i - B_i||_1 <= eps },  A = softmax(beta Q K^T) row-wise.
Untrusted code (search/) writes certificates; the trusted kernel (kernel/) checks them.
"""
__version__ = "0.1.0"
