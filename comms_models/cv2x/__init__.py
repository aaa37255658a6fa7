"""LTE-V2X PC5 sidelink (transmission mode 4) channel model: ``model.Cv2xChannel``."""
