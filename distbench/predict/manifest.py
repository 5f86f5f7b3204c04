"""The prediction of larger clusters, as the workflow and the report see it (distbench.core.manifest)."""

from distbench.core.manifest import FamilyManifest, Figures, Table, config_flag, register

MANIFEST = register(FamilyManifest(
    name="predict",
    order=50,
    active=config_flag("predict", "enabled"),
    tables=(
        Table("prediction_validation", "tables/predict/prediction_validation.csv"),
        Table("prediction_comm", "tables/predict/prediction_comm.csv", report=False),
        Table("prediction_training", "tables/predict/prediction_training.csv", report=False),
        Table("alpha_beta", "tables/predict/alpha_beta.csv", report=False),
    ),
    figures=(Figures("figures_predict"),),
    sections={"body": ("distbench.predict.section:PREDICTION",)},
    package_data=("templates/*.j2", "config.schema.yaml"),
    schema="config.schema.yaml",
    config_check="distbench.predict.hooks:config_check",
))
