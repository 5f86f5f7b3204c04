# Predicting larger clusters from the measured tables (distbench.predict): alpha-beta fits, their
# check against the larger measured world sizes, collective times and training scaling at
# predict.gpu_counts GPUs with the inter-node link of predict.preset.


rule predict:
    input:
        unpack(training_summary_input),
        comm="results/tables/comm_summary.csv",
    output:
        fits="results/tables/predict/alpha_beta.csv",
        comm="results/tables/predict/prediction_comm.csv",
        training="results/tables/predict/prediction_training.csv",
        validation="results/tables/predict/prediction_validation.csv",
    log:
        "results/logs/predict/predict.log",
    conda:
        "../envs/distbench.yaml"
    params:
        preset=config["predict"]["preset"],
        gpu_counts=config["predict"]["gpu_counts"],
    script:
        "../workflow/scripts/predict.py"


rule plot_predict:
    input:
        validation="results/tables/predict/prediction_validation.csv",
        comm="results/tables/predict/prediction_comm.csv",
        training="results/tables/predict/prediction_training.csv",
    output:
        directory("results/figures_predict"),
    log:
        "results/logs/plot/predict.log",
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/plot_predict.py"
