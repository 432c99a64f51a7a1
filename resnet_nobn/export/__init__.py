"""A trained run taken out of its run directory (writer.py): the files it holds (layout.py), its
serving signature (serving.py), its model card (model_card.py), and predicting with it
(predict.py)."""
