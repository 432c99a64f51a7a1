"""The network of Table 1 and its parts: the identity-parameterized block (blocks.py), the network
and its variants (network.py), the network with its preprocessing (classifier.py), each block's
Lipschitz bound (lipschitz.py). Importing it registers every Keras class of the project.

`custom_objects()` is importable from here, as an export's model card says:

    import keras
    from resnet_nobn.model import custom_objects
    model = keras.saving.load_model("EXPORT_DIR/model.keras", custom_objects=custom_objects())
"""
from resnet_nobn.model.network import custom_objects  # noqa: F401 -- the documented loading line
from resnet_nobn.model import classifier  # noqa: F401 -- registers ImageClassifier with Keras
