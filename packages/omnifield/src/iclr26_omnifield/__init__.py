"""iclr26-omnifield: OmniField, a continuity-aware neural field over any subset of modalities — arXiv 2511.02205.

>>> import torch, iclr26_omnifield as of
>>> model = of.OmniField(of.OmniFieldConfig(d_latent=32, n_latents=16, trunk_layers=1, dim_head=16))
>>> T = of.SensorSet(coords=torch.rand(1, 50, 2), values=torch.randn(1, 50))
>>> model({"T": T}, queries=torch.rand(1, 10, 2), horizon=0.5)["H"].shape   # cross-modal: H from T only
torch.Size([1, 10])

Importing the package does not import torch: public names load on first access (fast ``--help``).
"""

from iclr26_core.lazy import lazy_package

__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-omnifield",
    {
        "config": "OmniFieldConfig",
        "model": "OmniField SensorSet fleximodal_loss",
        "gff": "GaussianFourierFeatures sinusoid_table nyquist_check",
        "data": "FieldData synthetic_fields sensor_partition",
        "baselines": "idw gp_fit_kernel gp_predict knn_predict baseline_mse",
        "table": "read_table fit_table predict_table",
        "oracle": "fit_oracle oracle_mse headroom",
    },
)
